"""Helpers for the end-to-end SCons tests of ``scons --process-spawner``.

Each test copies tests/scons/project into its own temp dir and runs the SCons under test
in a new session, with a private empty HOME, under a timeout: Debian's ``scons``
(``/usr/bin/python3``) unless ``SPAWNPOOL_TEST_SCONS`` names another ``scons`` executable
and ``SPAWNPOOL_TEST_SCONS_PYTHON`` the interpreter it runs on (the compatibility
matrix, tests/compat, sets both for each SCons release x CPython cell).
The pool runs load the plugin with ``--site-dir=scons_plugin/site_scons``; the stock runs
load nothing.  Run:

    PYTHONPATH=build/python:scons_plugin /usr/bin/python3 -m pytest tests/scons

``SPAWNPOOL_BUILD`` points at another build dir (default: <repo>/build).
Not named conftest.py: the test modules import it, and one pytest run may collect several
test directories each with a conftest of its own.
"""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get('SPAWNPOOL_BUILD') or REPO / 'build').resolve()
MODULE_DIR = BUILD / 'python'
PLUGIN_DIR = REPO / 'scons_plugin'
SITE_DIR = PLUGIN_DIR / 'site_scons'
PROJECT = Path(__file__).resolve().parent / 'project'
SYSTEM_PYTHON = '/usr/bin/python3'   # runs the tests' helper tools, whatever runs SCons
SCONS = (os.environ.get('SPAWNPOOL_TEST_SCONS')
         or shutil.which('scons', path='/usr/bin:/usr/local/bin') or '/usr/bin/scons')
# The interpreter that runs SCONS: the one that must import the spawnpool module.
SCONS_PYTHON = os.environ.get('SPAWNPOOL_TEST_SCONS_PYTHON') or SYSTEM_PYTHON
# SCONS' task scheduler: 'legacy' (SCons <= 4.6, Debian's 4.4) or 'newparallel' (the
# default since 4.7); tests/compat says which for each cell.
SCONS_SCHEDULER = os.environ.get('SPAWNPOOL_TEST_SCONS_SCHEDULER') or 'legacy'

TIMEOUT = 180          # seconds for one scons run; a hang fails the test instead of CI
SETTLE = 10            # seconds allowed for spawners to go away after scons exits

# Never part of a build's output: SCons' database, the Configure log (compared on its
# own), files the interrupt tests leave and the probe (names the spawner).
# The pool's history (.spawnpool/) is its own, not the build's.
NOT_OUTPUTS = {'.sconsign.dblite', 'config.log', 'sleeper.pid', 'probe.txt', 'custom.txt',
               'memory-history.sqlite', 'memory-history.sqlite-wal',
               'memory-history.sqlite-shm'}

_module_status = None


def module_problem():
    """(skip reason or None, failure or None) for the real spawnpool module."""
    global _module_status
    if _module_status is None:
        if not (MODULE_DIR / 'spawnpool').is_dir():
            _module_status = ('spawnpool is not built: %s/spawnpool is missing (build with '
                              '`cmake -S . -B build && cmake --build build`, or set '
                              'SPAWNPOOL_BUILD)' % MODULE_DIR, None)
        else:
            r = subprocess.run([SCONS_PYTHON, '-c', 'import spawnpool; spawnpool.Pool'],
                               env=dict(base_env(), PYTHONPATH=str(MODULE_DIR)),
                               capture_output=True, timeout=60)
            _module_status = (None, None) if r.returncode == 0 else (
                None, 'spawnpool in %s is built but does not import under %s:\n%s'
                % (MODULE_DIR, SCONS_PYTHON, r.stderr.decode(errors='replace')))
    return _module_status


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ('SCONSFLAGS', 'PYTHONPATH', 'SCONS_LIB_DIR', 'PYTHONNOUSERSITE',
                        'SPAWNPOOL_SCONS_DEBUG', 'SPAWNPOOL_SPAWNER', 'PYTHONUSERBASE')}
    env['LC_ALL'] = 'C'
    env['PYTHONDONTWRITEBYTECODE'] = '1'    # no __pycache__ in the source tree
    env.update(extra)
    return env


class Run:
    """A finished scons run: returncode, stdout/stderr as text with the root normalised."""

    def __init__(self, args, returncode, stdout, stderr, root):
        self.args = args
        self.returncode = returncode
        self.raw_stdout = stdout
        self.raw_stderr = stderr
        self.stdout = normalise(stdout, root)
        self.stderr = normalise(stderr, root)
        if SCONS_SCHEDULER == 'newparallel':
            self.stderr = INTERRUPTED_COMMAND.sub(r'\1 Build interrupted.', self.stderr)

    def __repr__(self):
        return ('<Run %s rc=%s\n--- stdout\n%s--- stderr\n%s>'
                % (' '.join(self.args), self.returncode, self.stdout, self.stderr))


# NewParallel with -j2 and up reports a command that Ctrl-C killed either as "Error -2" or
# as "Build interrupted.": whichever comes first, the job thread that collects the result
# or the main thread's signal handler. Stock SCons 4.10.1 gave 13 of one and 2 of the
# other in 15 runs here (the legacy scheduler and -j1: always "Build interrupted.").
# Under NewParallel both read as the second, for stock and pool runs alike.
INTERRUPTED_COMMAND = re.compile(r'^(scons: \*\*\* \[[^\]\n]*\]) Error -2$', re.M)


def normalise(data, root):
    text = data.decode('utf-8', 'surrogateescape') if isinstance(data, bytes) else data
    return text.replace(str(root), '<ROOT>')


def run_session(argv, cwd, env, timeout=TIMEOUT, **kw):
    """Run argv in a new session; on timeout kill the whole session and fail."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        out, err = proc.communicate()
        pytest.fail('timed out after %ss: %s\n--- stdout\n%s\n--- stderr\n%s'
                    % (timeout, ' '.join(map(str, argv)), out.decode(errors='replace'),
                       err.decode(errors='replace')))
    return proc.returncode, out, err, proc.pid


def session_members(sid):
    """pids (other than zombies) whose session id is `sid`."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry, 'rb') as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b')') + 2:].split()
        if int(fields[3]) == sid and fields[0] != b'Z':
            found.append(int(entry))
    return found


def kill_session(sid):
    for pid in session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def describe_pids(pids):
    out = []
    for pid in pids:
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                out.append('%d: %s' % (pid, f.read().replace(b'\0', b' ').decode(errors='replace')))
        except OSError:
            out.append('%d: (gone)' % pid)
    return '\n'.join(out)


def wait_session_empty(sid, settle=SETTLE):
    """Wait up to `settle` s for every process of the session to exit; return leftovers."""
    deadline = time.monotonic() + settle
    while True:
        left = session_members(sid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


class Project:
    """A private copy of tests/scons/project."""

    def __init__(self, root, home):
        self.root = Path(root)
        self.home = Path(home)
        shutil.copytree(PROJECT, self.root)
        self.home.mkdir(parents=True, exist_ok=True)
        self.last_sid = None

    def env(self, pool, pythonpath=None, **extra):
        if pythonpath is None:
            pythonpath = [MODULE_DIR, PLUGIN_DIR] if pool else []
        env = base_env(HOME=str(self.home), **extra)
        if pythonpath:
            env['PYTHONPATH'] = os.pathsep.join(map(str, pythonpath))
        return env

    def argv(self, args, pool):
        if pool:
            return [SCONS, '--site-dir=%s' % SITE_DIR, '--process-spawner'] + list(args)
        return [SCONS] + list(args)

    def scons(self, *args, pool=False, env=None, argv=None, timeout=TIMEOUT, check_leaks=True):
        """Run scons; with check_leaks, fail if any process of its session outlives it."""
        argv = argv or self.argv(args, pool)
        env = env if env is not None else self.env(pool)
        rc, out, err, sid = run_session(argv, self.root, env, timeout)
        self.last_sid = sid
        run = Run([str(a) for a in argv[1:]], rc, out, err, self.root)
        if check_leaks:
            left = wait_session_empty(sid)
            if left:
                info = describe_pids(left)
                kill_session(sid)
                pytest.fail('processes left behind by %r:\n%s' % (run, info))
        return run

    def outputs(self):
        """{relative path: bytes} of every file in the tree except SCons' bookkeeping."""
        files = {}
        for path in sorted(self.root.rglob('*')):
            if path.is_file() and path.name not in NOT_OUTPUTS:
                files[str(path.relative_to(self.root))] = path.read_bytes()
        return files

    def config_log(self):
        path = self.root / 'config.log'
        return normalise(path.read_bytes(), self.root) if path.exists() else None

    def read(self, name):
        return (self.root / name).read_text()


def assert_same_outputs(a, b):
    fa, fb = a.outputs(), b.outputs()
    assert sorted(fa) == sorted(fb), 'different file sets'
    differ = [name for name in fa if fa[name] != fb[name]]
    assert not differ, 'files differ between the builds: %s' % differ


def assert_same_console(stock, pool, ordered=True):
    assert pool.returncode == stock.returncode, (stock, pool)
    if ordered:
        assert pool.stdout == stock.stdout, (stock, pool)
        assert pool.stderr == stock.stderr, (stock, pool)
    else:
        # -jN: commands run in a nondeterministic order in both builds, and concurrent
        # writers to one pipe interleave at write() granularity, not lines (dash writes
        # "sh: 1: " and "x: not found" separately).  So: the same bytes, and the same
        # SCons messages (each is a single write, hence intact).
        for a, b in ((stock.stdout, pool.stdout), (stock.stderr, pool.stderr)):
            assert sorted(b) == sorted(a), (stock, pool)
            assert sorted(SCONS_MESSAGE.findall(b)) == sorted(SCONS_MESSAGE.findall(a)), (
                stock, pool)


SCONS_MESSAGE = re.compile(r'scons: [^\n]*')


def shm_objects():
    try:
        return {n for n in os.listdir('/dev/shm') if 'spawnpool' in n}
    except FileNotFoundError:
        return set()


def shm_left_over(before, settle=SETTLE):
    """spawnpool objects in /dev/shm that were not there before and do not go away.

    Other pools on the machine (tests running in parallel) create objects briefly while
    they start; a leak is one that stays."""
    deadline = time.monotonic() + settle
    while True:
        left = shm_objects() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)

