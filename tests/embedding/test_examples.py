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
    for header in ('session.h', 'status.h', 'report.h'):
        assert (installed / 'include' / 'spawnpool' / header).is_file(), header
    libdir = next(p.parent for p in installed.rglob('libspawnpool.a'))
    assert (libdir / 'libspawnpool_protocol.a').is_file()
    assert (libdir / 'libspawnpool_stack.a').is_file()
    assert (libdir / 'libspawnpool_report.a').is_file()
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


def tools(work, name, script):
    """`work`/bin/`name` running `script`, and the launcher at `work`/launcher.sh."""
    (work / 'bin').mkdir(parents=True)
    tool = work / 'bin' / name
    tool.write_text(script)
    launcher = work / 'launcher.sh'
    launcher.write_text(LAUNCHER)
    for path in (tool, launcher):
        path.chmod(0o755)
    return launcher


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
    launcher = tools(work, 'cc', FAKE_CC)
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


# A stand-in for a command the launcher does not take (a link): it logs when it ran.
FAKE_LINK = r"""#!/bin/sh
echo "start $(date +%s.%N)" >> "$RUNS"
sleep 0.3
echo "stop $(date +%s.%N)" >> "$RUNS"
"""


@pytest.mark.parametrize('local', [None, 1])
def test_cpp_build_driver_bounds_local_commands(cpp_examples, tmp_path, local):
    """With a launcher, what it does not take runs on this machine at most --local N at
    once, by default as many as the CPUs this process may use (the one default every
    front end asks spawnpool::default_local_slots for)."""
    launcher = tools(tmp_path, 'link', FAKE_LINK)
    (tmp_path / 'commands.txt').write_text('link\n' * 4)
    driver = [str(cpp_examples / 'build_driver'), '-j', '4', '--launcher', str(launcher)]
    if local is not None:
        driver += ['--local', str(local)]
    env = clean_env(PATH='%s:%s' % (tmp_path / 'bin', os.environ.get('PATH', '')),
                    RUNS=str(tmp_path / 'runs.log'))
    env.pop('MAKEFLAGS', None)
    r = subprocess.run(driver + ['commands.txt'], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r
    assert not (tmp_path / 'launched.log').exists()     # no compile: all local
    bound = local if local is not None else len(os.sched_getaffinity(0))
    assert most_at_once(tmp_path / 'runs.log') == min(4, bound)


# Prints the name of the process that started it: the spawner with direct exec, sh without.
PARENT = r"""#!/bin/sh
echo "parent $(cat /proc/$PPID/comm)"
"""


def test_cpp_build_driver_report_compilers_and_direct_exec(cpp_examples, tmp_path):
    """--report without --trace writes the HTML report (from a temporary trace it removes);
    --compilers names another compiler for the launcher; --direct-exec no runs every line
    through sh."""
    launcher = tools(tmp_path, 'foo-cc', FAKE_CC)
    tool = tmp_path / 'bin' / 'parent'
    tool.write_text(PARENT)
    tool.chmod(0o755)
    (tmp_path / 'commands.txt').write_text('foo-cc -c a.c -o a.o\nparent\n')
    env = clean_env(PATH='%s:%s' % (tmp_path / 'bin', os.environ.get('PATH', '')),
                    RUNS=str(tmp_path / 'runs.log'), TMPDIR=str(tmp_path))
    driver = [str(cpp_examples / 'build_driver'), '--launcher', str(launcher),
              '--compilers', 'foo-cc,bar-cc', '--report', 'report.html', 'commands.txt']
    r = subprocess.run(driver, cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r
    assert (tmp_path / 'launched.log').read_text() == 'launched: foo-cc -c a.c -o a.o\n'
    page = (tmp_path / 'report.html').read_text()
    assert page.startswith('<!DOCTYPE html>') or '<html' in page[:200], page[:200]
    assert 'foo-cc -c a.c -o a.o' in page and 'http://' not in page.split('<script')[0]
    assert not list(tmp_path.glob('*trace*'))     # the session's temporary trace: gone
    assert 'parent spawnpool' in r.stdout, r.stdout   # direct exec: the spawner, no sh between
    r = subprocess.run(driver[:1] + ['--direct-exec', 'no', 'commands.txt'], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r
    assert 'parent sh\n' in r.stdout, r.stdout


def test_cpp_build_driver_report_and_history_problems_are_warnings(cpp_examples, tmp_path):
    """The session's report (SessionOptions::report_path) that cannot be written is one
    warning at the end and the build's status stays; the history (spawnpool::history_path)
    is kept where the status line reads it, and one named where nothing reads it is a
    warning and no file."""
    (tmp_path / 'commands.txt').write_text('true\n')
    env = clean_env(TMPDIR=str(tmp_path))
    driver = [str(cpp_examples / 'build_driver'), '--status', 'off']

    def run(*args):
        return subprocess.run(driver + list(args) + ['commands.txt'], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
    r = run('--report', 'no-dir/report.html')
    assert r.returncode == 0, r
    assert r.stderr.startswith('build_driver: --report: cannot write no-dir/report.html'), r
    assert r.stderr.count('\n') == 1, r
    assert not list(tmp_path.glob('*trace*'))
    r = run('--history', 'h.db')
    assert r.returncode == 0, r
    assert r.stderr == ('build_driver: --history: only used with --memory or --status; '
                        'ignored\n'), r
    assert not (tmp_path / 'h.db').exists()
    r = run('--status', 'plain', '--history', 'h.db')
    assert r.returncode == 0 and r.stderr == '', r
    assert (tmp_path / 'h.db').is_file()


def test_cpp_build_driver_jobserver_no_under_make(cpp_examples, tmp_path):
    """--jobserver no: make's tokens are not taken, so -j bounds the commands alone."""
    if shutil.which('make') is None:
        pytest.skip('no make')
    tools(tmp_path, 'cc', FAKE_CC)
    (tmp_path / 'commands.txt').write_text(
        ''.join('cc -c f%d.c -o f%d.o\n' % (i, i) for i in range(4)))
    driver = [cpp_examples / 'build_driver', '-j', '4', '--jobserver', 'no', 'commands.txt']
    (tmp_path / 'GNUmakefile').write_text('all:\n\t+%s\n' % ' '.join(map(str, driver)))
    env = clean_env(PATH='%s:%s' % (tmp_path / 'bin', os.environ.get('PATH', '')),
                    RUNS=str(tmp_path / 'runs.log'))
    env.pop('MAKEFLAGS', None)
    run(['make', '-j2', '-s'], env=env, cwd=tmp_path)
    assert most_at_once(tmp_path / 'runs.log') == 4


STATUS_COMMANDS = 'echo one\nsleep 0.2; echo two\n---\necho three\n'


def test_cpp_build_driver_status_plain_and_auto_into_a_pipe(cpp_examples, tmp_path):
    """--status plain: progress lines in the form scripts parse, the summary last, no
    escape codes; auto into a pipe: nothing of the status, as a stock build; a setting
    that is none of the four is a usage error."""
    (tmp_path / 'commands.txt').write_text(STATUS_COMMANDS)
    driver = [str(cpp_examples / 'build_driver'), '-j', '2']
    env = clean_env(TERM='xterm')
    plain = subprocess.run(driver + ['--status', 'plain', 'commands.txt'], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain
    assert '\x1b' not in plain.stdout + plain.stderr and '\r' not in plain.stdout
    lines = plain.stdout.splitlines()
    assert {'one', 'two', 'three'} <= set(lines), lines
    status = [l for l in lines if l.startswith('[')]
    assert status and status[-1].startswith('[3/3 100%] ') and status[-1].endswith('done'), lines
    auto = subprocess.run(driver + ['commands.txt'], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert auto.returncode == 0, auto
    assert not [l for l in auto.stdout.splitlines() if l.startswith('[')], auto.stdout
    assert '\x1b' not in auto.stdout + auto.stderr
    bad = subprocess.run(driver + ['--status', 'sometimes', 'commands.txt'], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert bad.returncode == 2 and 'auto, line, plain or off' in bad.stderr, bad


def test_cpp_build_driver_status_line_on_a_terminal(cpp_examples, tmp_path):
    """--status auto on a terminal: the line is drawn in place (escape codes), every
    command's output line is whole, and the screen ends with the summary line."""
    import pty
    import select
    (tmp_path / 'commands.txt').write_text(STATUS_COMMANDS)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([str(cpp_examples / 'build_driver'), '-j', '2',
                                 'commands.txt'], cwd=tmp_path, env=clean_env(TERM='xterm'),
                                stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
        os.close(follower)
        follower = -1
        screen = b''
        while True:
            ready, _, _ = select.select([leader], [], [], TIMEOUT)
            if not ready:
                proc.kill()
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:         # EIO: the driver closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        assert proc.wait(timeout=TIMEOUT) == 0, screen
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    text = screen.decode()
    assert '\x1b[K' in text, text         # the line was cleared and drawn again
    # What is left once the line's redraws are played out: whole lines, the summary last.
    final = [line.rstrip('\r').rsplit('\r', 1)[-1].replace('\x1b[K', '')
             for line in text.split('\n')]
    final = [line for line in final if line]
    assert {'one', 'two', 'three'} <= set(final), final
    assert final[-2].startswith('[3/3 100%] ') and final[-2].endswith('done'), final
    assert final[-1] == 'build_driver: 3 commands, 0 failed', final


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
