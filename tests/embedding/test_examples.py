"""The embedding examples build and run: examples/cpp against an installed spawnpool
(find_package, relocated prefix), examples/python against the built package.

    PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/embedding

``SPAWNPOOL_BUILD`` points at another build dir (default: <repo>/build); it must have been
configured with the current CMakeLists.txt (the install rules).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get('SPAWNPOOL_BUILD') or REPO / 'build').resolve()
EXAMPLES = REPO / 'examples'
SYSTEM_PYTHON = '/usr/bin/python3'
TIMEOUT = 600


def run(argv, **kw):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                       timeout=TIMEOUT, **kw)
    assert r.returncode == 0, '%s\n--- stdout\n%s\n--- stderr\n%s' % (
        ' '.join(map(str, argv)), r.stdout, r.stderr)
    return r


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ('SPAWNPOOL_SPAWNER', 'PYTHONPATH', 'CMAKE_PREFIX_PATH')}
    env['LC_ALL'] = 'C'
    env.update(extra)
    return env


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """spawnpool installed with `cmake --install`, then moved: a relocated prefix."""
    install_script = BUILD / 'cmake_install.cmake'
    if not install_script.exists() or 'spawnpoolTargets' not in install_script.read_text():
        pytest.skip('%s is not configured with the install rules (run cmake --build %s)'
                    % (BUILD, BUILD))
    if shutil.which('cmake') is None:
        pytest.skip('no cmake')
    base = tmp_path_factory.mktemp('install')
    run(['cmake', '--install', BUILD, '--prefix', base / 'prefix'])
    moved = base / 'moved'
    (base / 'prefix').rename(moved)
    return moved


def test_install_layout(installed):
    assert (installed / 'include' / 'spawnpool' / 'pool.h').is_file()
    libdir = next(p.parent for p in installed.rglob('libspawnpool.a'))
    assert (libdir / 'libspawnpool_protocol.a').is_file()
    assert (libdir / 'cmake' / 'spawnpool' / 'spawnpoolConfig.cmake').is_file()
    spawner = next(installed.rglob('spawnpool-spawner'))
    assert spawner.parent.name == 'spawnpool' and os.access(spawner, os.X_OK)


def test_cpp_example(installed, tmp_path):
    build = tmp_path / 'build'
    run(['cmake', '-S', EXAMPLES / 'cpp', '-B', build, '-DCMAKE_BUILD_TYPE=Release',
         '-DCMAKE_PREFIX_PATH=%s' % installed], env=clean_env())
    run(['cmake', '--build', build, '-j2'], env=clean_env())
    r = run([build / 'mini_driver'], env=clean_env(), cwd=tmp_path)
    out = r.stdout
    # The relocated spawner, found through the package config, not the configured prefix.
    assert 'pool: 2 slots, spawner %s/' % installed in out, out
    assert 'echo compiling a.c: exit 0, stdout "compiling a.c\\n", stderr ""' in out
    assert 'stdout "compiled b.c\\n", stderr "warning: b.c\\n"' in out
    assert 'exit 3: exit 3,' in out
    assert 'sleep 0.1; echo slow done: exit 0, stdout "slow done\\n"' in out
    assert 'no-such-program-for-the-example: not started (stage exec, errno 2)' in out
    assert 'passthrough: hello from a spawner\npassthrough: exit 0\n' in out


def test_python_example(tmp_path):
    module_dir = BUILD / 'python'
    if not (module_dir / 'spawnpool').is_dir():
        pytest.skip('spawnpool is not built in %s' % module_dir)
    outdir = tmp_path / 'out'
    r = run([SYSTEM_PYTHON, EXAMPLES / 'python' / 'mini_driver.py', outdir],
            env=clean_env(PYTHONPATH=str(module_dir), PYTHONDONTWRITEBYTECODE='1'),
            cwd=tmp_path)
    out = r.stdout
    assert "run: returncode 3, stdout b'out\\n', stderr b'err\\n'" in out
    assert ("not started: stage exec, errno 2: cannot execute "
            "'no-such-program-for-the-example': No such file or directory") in out
    assert 'SpawnError: errno 2, stage exec' in out
    assert "split_simple_command: ['cc', '-o', 'a b.o', '-c', 'a.c']" in out
    assert 'statuses: [0, 0, 0, 0, 0, 0, 0, 0, 0]' in out
    assert 'mini_driver: statistics' in out and '9 run, 0 failed' in out
    assert (outdir / 'copy.txt').read_text() == 'building 0\n'
    events = [e for e in json.loads((outdir / 'trace.json').read_text())['traceEvents']
              if e.get('ph') == 'X']
    assert len(events) == 9
