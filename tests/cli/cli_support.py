"""Shared by the tests in tests/cli: finding the built package, helper programs, a pool.

Not a conftest.py on purpose: tests/scons imports its own `conftest` by name, and two
modules of that name in one pytest session would shadow each other.

    PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/cli

``SPAWNPOOL_BUILD`` points at another build dir (default: <repo>/build).
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get('SPAWNPOOL_BUILD') or REPO / 'build').resolve()
MODULE_DIR = BUILD / 'python'
HELPERS = Path(__file__).resolve().parent / 'helpers'
SYSTEM_PYTHON = '/usr/bin/python3'

IMPORT_PROBLEM = ''
try:
    import spawnpool  # noqa: F401  (PYTHONPATH given by the caller)
except ImportError:
    sys.path.insert(0, str(MODULE_DIR))
    try:
        import spawnpool  # noqa: F401
    except ImportError as e:
        spawnpool = None
        IMPORT_PROBLEM = 'spawnpool is not importable from %s: %s' % (MODULE_DIR, e)

needs_module = pytest.mark.skipif(spawnpool is None, reason=IMPORT_PROBLEM or 'importable')


def module_env(**extra):
    """An environment in which `/usr/bin/python3 -m spawnpool` finds the same package."""
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME')}
    env['PYTHONPATH'] = str(Path(spawnpool.__file__).resolve().parent.parent)
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    env['LC_ALL'] = 'C'
    env.update(extra)
    return env


@pytest.fixture(scope='session')
def helper_bin(tmp_path_factory):
    """A directory holding the compiled helper programs: print_argv, exit_as."""
    cc = shutil.which('cc') or shutil.which('gcc')
    if cc is None:
        pytest.skip('no C compiler for the helper programs')
    out = tmp_path_factory.mktemp('helper-bin')
    for source in HELPERS.glob('*.c'):
        subprocess.run([cc, '-O', '-o', str(out / source.stem), str(source)], check=True)
    return out


def shm_objects():
    try:
        return {n for n in os.listdir('/dev/shm') if n.startswith('spawnpool')}
    except FileNotFoundError:
        return set()


def shm_left_over(before, settle=10.0):
    """spawnpool objects in /dev/shm that were not there before and do not go away.

    Other pools on the machine (other tests, other builds) create objects for a moment
    while they start; a leak is one that stays."""
    deadline = time.monotonic() + settle
    while True:
        left = shm_objects() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def assert_no_children():
    """No child process left, running or unreaped: waitpid() must say ECHILD."""
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return
    pytest.fail('a child process was left behind (%s)' % (pid or 'still running'))


@pytest.fixture
def pool():
    """A two-slot pool; afterwards no spawner, zombie or shared-memory object is left."""
    before = shm_objects()
    with spawnpool.Pool(slots=2) as p:
        yield p
    assert not shm_left_over(before)
    assert_no_children()
