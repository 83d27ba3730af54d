"""--process-spawner-trace=FILE and --process-spawner-stats: a valid Chrome trace with one
event per command, also after a failed or interrupted build; statistics at the end."""

import os
import re
import signal
import subprocess
import time

from scons_e2e import TIMEOUT, Run, kill_session, wait_session_empty
from test_issue6_common import trace_events

STATS = '--process-spawner-stats'


def trace_option(project):
    return '--process-spawner-trace=%s' % (project.root / 'build.trace.json')


def test_trace_and_stats_of_a_build(pool_module, project):
    r = project.scons('-j2', '--config=force', trace_option(project), STATS, pool=True)
    assert r.returncode == 0, r
    events = trace_events(project.root / 'build.trace.json')
    # The trace has the line sh got: SCons quotes file names there, not in its echo.
    commands = [e['args']['command'].replace('"', '') for e in events]
    # Every command SCons echoed ran through the pool and is in the trace; Configure's
    # checks (not echoed) are there too.
    echoed = [l for l in r.stdout.splitlines() if l.startswith(('gcc ', 'ar ', 'ranlib '))]
    missing = [line for line in echoed if line not in commands]
    assert echoed and not missing, (missing, commands)
    assert any('conftest' in c for c in commands), commands
    for e in events:
        assert e['ph'] == 'X' and 0 <= e['tid'] < 2 and e['dur'] >= 0
        assert e['args']['max_rss_kb'] > 0 and e['args']['queue_wait_ms'] >= 0
    # Statistics come last, after SCons' own last line.
    out = r.stdout
    stats = out[out.index('scons: done building targets.'):]
    assert 'scons: spawnpool: statistics' in stats, out
    m = re.search(r'commands: +(\d+) run, (\d+) failed', stats)
    assert m and int(m.group(1)) == len(events), (stats, len(events))
    assert int(m.group(2)) == sum(1 for e in events if e['args']['returncode'] != 0)
    assert '(2 slots' in stats and 'longest commands:' in stats


def test_failed_build(pool_module, project):
    r = project.scons('-Q', '-k', trace_option(project), STATS, 'broken', 'exit3', 'main',
                      pool=True)
    assert r.returncode == 2, r
    events = trace_events(project.root / 'build.trace.json')
    failed = {e['args']['command']: e['args']['returncode'] for e in events
              if e['args']['returncode'] != 0}
    assert 3 in failed.values() and 1 in failed.values(), failed
    assert re.search(r'commands: +\d+ run, %d failed' % len(failed), r.stdout), r


def test_interrupted_build_leaves_a_valid_trace(pool_module, project):
    pid_file = project.root / 'sleeper.pid'
    proc = subprocess.Popen(project.argv(['-Q', trace_option(project), STATS, 'sleeper'], True),
                            cwd=project.root, env=project.env(True), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)              # Ctrl-C
        out, err = proc.communicate(timeout=30)
    finally:
        left = wait_session_empty(proc.pid)
        kill_session(proc.pid)
    assert not left
    run = Run(['sleeper'], proc.returncode, out, err, project.root)
    assert run.returncode == 2 and 'Build interrupted' in run.stderr, run
    events = trace_events(project.root / 'build.trace.json')
    sleeper = [e for e in events if 'sleep 60' in e['args']['command']]
    assert len(sleeper) == 1 and sleeper[0]['args']['returncode'] != 0, events
    assert 'scons: spawnpool: statistics' in run.stdout, run


def test_without_the_pool_the_options_do_nothing(pool_module, projects):
    stock, plugged = projects
    argv = plugged.argv(['-Q', trace_option(plugged), STATS, 'main'], pool=True)
    argv.remove('--process-spawner')
    rs = stock.scons('-Q', 'main')
    rp = plugged.scons(argv=argv, env=plugged.env(True))
    assert (rp.returncode, rp.stdout, rp.stderr) == (rs.returncode, rs.stdout, rs.stderr)
    assert not (plugged.root / 'build.trace.json').exists()


def test_trace_names_each_commands_targets_and_inputs(pool_module, project):
    """For the report's critical path (tests/report draws it in a browser): each command
    of an action carries its targets and inputs as SCons names them; the report option
    writes the page at the end, from a temporary trace when none was asked for."""
    report = project.root / 'build.html'
    r = project.scons('-Q', '-j2', trace_option(project),
                      '--process-spawner-report=%s' % report, 'main', pool=True)
    assert r.returncode == 0, r
    events = trace_events(project.root / 'build.trace.json')
    by_target = {tuple(e['args']['targets']): e['args'] for e in events if 'targets' in e['args']}
    compile_ = by_target[(os.path.join('lib', 'checksum.o'),)]
    assert os.path.join('lib', 'checksum.c') in compile_['inputs'], compile_
    link = by_target[(os.path.join('app', 'wc_tool'),)]
    assert os.path.join('app', 'wc_tool.o') in link['inputs'], link
    assert os.path.join('lib', 'libtextstat.a') in link['inputs'], link
    page = report.read_text()
    assert page.startswith('<!DOCTYPE html>') and '"lib/checksum.o"' in page

    report.unlink()
    r = project.scons('-Q', '-c', 'main', pool=True)
    r = project.scons('-Q', '-j2', '--process-spawner-report=%s' % report, 'main', pool=True)
    assert r.returncode == 0 and r.stderr == '', r
    assert '"lib/checksum.o"' in report.read_text()
