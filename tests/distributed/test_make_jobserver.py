"""make -jN around `scons --process-spawner -j8`, and local slots, measured with probes.

Each build command is a small script that appends "start|end KIND PID NS" lines to a
log; the most overlapping start/end intervals is the concurrency the build reached.
"""

import os
import signal
import subprocess
import time

import pytest

import scons_e2e
from dist_support import (PROBE, LAUNCHER, TIMEOUT, build_env, kill_session,
                          max_concurrency, run, scons_argv, wait_session_empty,
                          write_script)

PROBES = 16
SCONSTRUCT = '''
env = Environment()
for i in range(%(probes)d):
    env.Command('out%%02d.txt' %% i, [], 'sh %(probe)s %(log)s local $TARGET')
for i in range(%(compiles)d):
    src = File('c%%02d.c' %% i)
    env.Object('c%%02d.o' %% i, src)
'''


@pytest.fixture
def probe_project(tmp_path):
    """A project of PROBES probe commands (and optional tiny compiles)."""
    root = tmp_path / 'proj'
    root.mkdir()
    write_script(root / 'probe.sh', PROBE)

    def make(compiles=0):
        log = root / 'times.log'
        (root / 'SConstruct').write_text(SCONSTRUCT % dict(
            probes=PROBES, probe=root / 'probe.sh', log=log, compiles=compiles))
        for i in range(compiles):
            (root / ('c%02d.c' % i)).write_text('int f%d(void) { return %d; }\n' % (i, i))
        return root, log
    return make


def makefile(root, scons_args, recursive=True):
    line = '%s%s -Q -j8 %s' % ('+' if recursive else '', ' '.join(map(str, scons_argv())),
                               ' '.join(scons_args))
    (root / 'GNUmakefile').write_text('all:\n\t%s\n' % line)


def test_make_j2_bounds_scons_j8(pool_module, probe_project, tmp_path):
    root, log = probe_project()
    makefile(root, [])
    r = run(['make', '-j2'], root, build_env(tmp_path / 'home'))
    assert r.returncode == 0, r
    most, count = max_concurrency(log)
    assert count == PROBES
    assert most == 2, r         # make's implicit slot for the recipe + its one token


def test_make_j3_and_jobserver_off(pool_module, probe_project, tmp_path):
    """The probes do see concurrency: -j3 gives 3, and without the jobserver all 8."""
    root, log = probe_project()
    makefile(root, [])
    r = run(['make', '-j3'], root, build_env(tmp_path / 'home'))
    assert r.returncode == 0, r
    assert max_concurrency(log) == (3, PROBES)
    log.unlink()
    for out in root.glob('out*.txt'):
        out.unlink()
    makefile(root, ['--process-spawner-jobserver=no'])
    r = run(['make', '-j2'], root, build_env(tmp_path / 'home'))
    assert r.returncode == 0, r
    most, _ = max_concurrency(log)
    assert most > 2, r


def test_jobserver_not_passed_to_a_plain_recipe_line(pool_module, probe_project, tmp_path):
    """make 4.3 closes the jobserver fds for a line without '+' or $(MAKE)."""
    root, log = probe_project()
    makefile(root, [], recursive=False)
    r = run(['make', '-j4'], root, build_env(tmp_path / 'home'))
    assert r.returncode == 0, r
    assert "make's jobserver (fds" in r.stderr and "'+'" in r.stderr, r
    assert max_concurrency(log) == (1, PROBES)


def test_local_slots_bound_non_compiles(pool_module, probe_project, tmp_path):
    """With a launcher, -j8 runs up to 8 compiles but at most --process-spawner-local
    other commands."""
    root, log = probe_project(compiles=8)
    launcher = write_script(tmp_path / 'slow_launcher.sh',
                            LAUNCHER.replace('"$SPAWNPOOL_TEST_LOG"', '"%s"' % log))
    r = run(scons_argv('-Q', '-j8', '--process-spawner-launcher=%s' % launcher,
                       '--process-spawner-local=2'), root, build_env(tmp_path / 'home'))
    assert r.returncode == 0, r
    assert max_concurrency(log, 'local') == (2, PROBES)
    most, launched = max_concurrency(log, 'launched')
    assert launched == 8
    assert most >= 3, r
    assert 'scons: spawnpool: slow_launcher.sh: 8 compiles through slow_launcher.sh' in r.stdout


def test_ctrl_c_under_make_starts_nothing_more(pool_module, tmp_path):
    """SIGINT to make's process group (a terminal's Ctrl-C) while scons' job threads
    wait for tokens: scons stops at once and no waiting command starts."""
    root = tmp_path / 'proj'
    root.mkdir()
    starts = root / 'starts.log'
    (root / 'SConstruct').write_text(
        "env = Environment()\n"
        "for i in range(8):\n"
        "    env.Command('out%%d.txt' %% i, [], 'echo $TARGET >> %s; sleep 60; "
        "echo x > $TARGET')\n" % starts)
    makefile(root, [])
    for attempt in range(3):        # the window is a race: try it more than once
        starts.unlink(missing_ok=True)
        proc = subprocess.Popen(['timeout', '-s', 'KILL', str(TIMEOUT), 'make', '-j2'],
                                cwd=root, env=build_env(tmp_path / 'home'),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                starts.exists() and len(starts.read_text().split()) >= 2):
            time.sleep(0.05)
        time.sleep(0.3)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # What was still there (make, scons, a spawner, a command), for the failure.
            left = scons_e2e.describe_pids(scons_e2e.session_members(proc.pid))
            kill_session(proc.pid)
            out, err = proc.communicate()
            pytest.fail('make/scons did not stop after SIGINT; still running:\n%s\n%s\n%s'
                        % (left, out, err))
        elapsed = time.monotonic() - t0
        left = wait_session_empty(proc.pid)
        kill_session(proc.pid)
        assert not left
        assert elapsed < 20
        assert proc.returncode != 0
        assert len(starts.read_text().split()) == 2, (out, err)
        # Legacy Parallel says 'Build interrupted'; NewParallel reports a command the
        # interrupt ended as 'Error -2' or as 'Build interrupted.', by a race of its own
        # (stock SCons too): the same message either way.
        assert b'Build interrupted' in err or b'] Error -2' in err, err


MEMORY_SCONSTRUCT = '''
env = Environment()
for i in range(2):
    env.Command('big%%d.txt' %% i, [],
                'echo start big%%d $$(date +%%%%s.%%%%N) >> %(log)s; '
                '%(alloc)s 450 3000 && echo x > $TARGET; '
                'echo end big%%d $$(date +%%%%s.%%%%N) >> %(log)s' %% (i, i))
'''
STEPS = 6
MEMORY_MAKEFILE = '''all: scons step%(last)d
scons:
\t+%(scons)s -Q -j2 --process-spawner-memory=700M
%(steps)s'''


def test_a_command_waiting_for_memory_leaves_makes_token_free(pool_module, tmp_path):
    """make -j2 (one token) runs scons, whose second 450 MiB command waits for memory
    (700M budget, warm history), and a chain of short jobs: the waiting command holds no
    token, so every step of the chain runs while scons' first command still runs."""
    alloc = scons_e2e.BUILD / 'tests' / 'helpers' / 'alloc_touch'
    if not alloc.exists():
        pytest.skip('%s is not built' % alloc)
    root = tmp_path / 'proj'
    root.mkdir()
    log = root / 'times.log'
    (root / 'SConstruct').write_text(MEMORY_SCONSTRUCT % dict(log=log, alloc=alloc))
    # The chain starts once scons' first command runs (step 0 waits for it), so that its
    # steps need the token while scons' second command waits for memory.
    wait_for_scons = 'while ! grep -q start %s 2>/dev/null; do sleep 0.05; done; ' % log
    steps = ''.join('step%d:%s\n\t%secho step %d $$(date +%%s.%%N) >> %s; sleep 0.2\n'
                    % (i, ' step%d' % (i - 1) if i else '', '' if i else wait_for_scons,
                       i, log) for i in range(STEPS))
    (root / 'GNUmakefile').write_text(MEMORY_MAKEFILE % dict(
        last=STEPS - 1, scons=' '.join(map(str, scons_argv())), steps=steps))
    env = build_env(tmp_path / 'home')
    # Warm the history: both commands' peaks are known, so the second one waits.
    r = run(scons_argv('-Q', '-j2', '--process-spawner-memory=700M'), root, env)
    assert r.returncode == 0, r
    for out in root.glob('big*.txt'):
        out.unlink()
    log.unlink()
    r = run(['make', '-j2'], root, env)
    assert r.returncode == 0, r
    events = {}
    for line in log.read_text().split('\n'):
        if line:
            kind, name, when = line.split()
            events[(kind, name)] = float(when)
    starts = sorted(events[('start', 'big%d' % i)] for i in range(2))
    first_end = min(events[('end', 'big%d' % i)] for i in range(2))
    assert starts[1] >= first_end - 0.05, (events, r)   # the memory admission held one back
    steps = [events[('step', str(i))] for i in range(STEPS)]
    late = [when for when in steps if when > first_end]
    assert not late, ('make could not start %d of its jobs while a command waited for '
                      'memory: %s' % (len(late), sorted(events.items(), key=lambda e: e[1])))
