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
    assert (installed / 'include' / 'spawnpool' / 'session.h').is_file()
    libdir = next(p.parent for p in installed.rglob('libspawnpool.a'))
    assert (libdir / 'libspawnpool_protocol.a').is_file()
    assert (libdir / 'libspawnpool_stack.a').is_file()
    assert (libdir / 'cmake' / 'spawnpool' / 'spawnpoolConfig.cmake').is_file()
    spawner = next(installed.rglob('spawnpool-spawner'))
    assert spawner.parent.name == 'spawnpool' and os.access(spawner, os.X_OK)


@pytest.fixture(scope='module')
def cpp_examples(installed, tmp_path_factory):
    """examples/cpp built against the installed (relocated) spawnpool."""
    build = tmp_path_factory.mktemp('examples') / 'build'
    run(['cmake', '-S', EXAMPLES / 'cpp', '-B', build, '-DCMAKE_BUILD_TYPE=Release',
         '-DCMAKE_PREFIX_PATH=%s' % installed], env=clean_env())
    run(['cmake', '--build', build, '-j2'], env=clean_env())
    return build


def test_cpp_example(installed, cpp_examples, tmp_path):
    build = cpp_examples
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


# A stand-in compiler: `cc -c X.c -o X.o` writes "begin X.o", waits, writes "end X.o" and a
# warning, and logs when it ran (for the jobserver's bound).
FAKE_CC = r"""#!/bin/sh
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo "start $(date +%s.%N)" >> "$RUNS"
echo "begin $out"
sleep 0.3
echo "end $out"
echo "warning: in $out" >&2
echo obj > "$out"
echo "stop $(date +%s.%N)" >> "$RUNS"
"""
LAUNCHER = """#!/bin/sh
echo "launched: $*" >> launched.log
exec "$@"
"""


def most_at_once(runs_log):
    events = []
    for kind, when in (l.split() for l in runs_log.read_text().splitlines()):
        events.append((float(when), 1 if kind == 'start' else -1))
    running = most = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        running += step
        most = max(most, running)
    return most


def test_cpp_build_driver_runs_every_feature_under_make(cpp_examples, tmp_path):
    """examples/cpp/build_driver: the same stack as SCons' (launcher, jobserver, output
    sync, trace, statistics, memory admission), from a C++ driver run by make -j2."""
    if shutil.which('make') is None:
        pytest.skip('no make')
    work = tmp_path / 'work'
    (work / 'bin').mkdir(parents=True)
    cc = work / 'bin' / 'cc'
    cc.write_text(FAKE_CC)
    launcher = work / 'launcher.sh'
    launcher.write_text(LAUNCHER)
    for script in (cc, launcher):
        script.chmod(0o755)
    compiles = ['cc -c f%d.c -o f%d.o' % (i, i) for i in range(4)]
    (work / 'commands.txt').write_text('\n'.join(compiles + ['---', 'cat f0.o f3.o > app']) + '\n')
    driver = [cpp_examples / 'build_driver', '-j', '4', '--launcher', launcher,
              '--output=sync', '--trace', 'trace.json', '--stats', '--memory', '2G',
              '--history', 'history.db', 'commands.txt']
    # '+': make hands the recipe its jobserver (make -j2: the implicit slot and one token).
    (work / 'GNUmakefile').write_text('all:\n\t+%s\n' % ' '.join(map(str, driver)))
    env = clean_env(PATH='%s:%s' % (work / 'bin', os.environ.get('PATH', '')),
                    RUNS=str(work / 'runs.log'))
    env.pop('MAKEFLAGS', None)
    r = run(['make', '-j2', '-s'], env=env, cwd=work)
    out = r.stdout
    assert 'build_driver: 5 commands, 0 failed' in out, out
    assert (work / 'app').read_text() == 'obj\nobj\n'
    # The launcher ran each compile, and only those; its summary ends the build.
    launched = (work / 'launched.log').read_text().splitlines()
    assert sorted(launched) == sorted('launched: ' + c for c in compiles)
    assert 'build_driver: launcher.sh: 4 compiles through launcher.sh' in out, out
    # make -j2 bounds four driver threads to two commands at once.
    assert most_at_once(work / 'runs.log') == 2
    # Output sync: each command's lines together, although two ran at once.
    lines = out.splitlines()
    for i in range(4):
        begin = lines.index('begin f%d.o' % i)
        assert lines[begin + 1] == 'end f%d.o' % i, out
    assert sorted(l for l in r.stderr.splitlines() if l.startswith('warning: in')) == \
        ['warning: in f%d.o' % i for i in range(4)]
    # The statistics, with memory admission's lines.
    assert 'build_driver: statistics' in out and '5 run, 0 failed' in out, out
    assert 'memory measured by:' in out, out
    # The trace: valid JSON, one event per command, each with the line that ran.
    trace = json.loads((work / 'trace.json').read_text())
    events = [e for e in trace['traceEvents'] if e.get('ph') == 'X']
    assert sorted(e['args']['command'] for e in events) == sorted(
        ['%s %s' % (launcher, c) for c in compiles] + ['cat f0.o f3.o > app'])
    assert all('peak_memory_mib' in e['args'] for e in events)
    assert (work / 'history.db').is_file()


def test_cpp_build_driver_failure_is_data(cpp_examples, tmp_path):
    """A failing command and one that cannot start are reported, the next stage does not
    run, and the exit status says so."""
    (tmp_path / 'commands.txt').write_text('exit 3\nno-such-program-here\n---\ntouch later\n')
    r = subprocess.run([str(cpp_examples / 'build_driver'), 'commands.txt'], cwd=tmp_path,
                       env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 1, r
    assert 'build_driver: failed (exit 3): exit 3' in r.stderr
    assert 'no-such-program-here' in r.stderr
    assert 'build_driver: 2 commands, 2 failed' in r.stdout
    assert not (tmp_path / 'later').exists()
