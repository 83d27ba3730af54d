"""``/usr/bin/python3 -m spawnpool run``: commands from a file or stdin, make-like failures,
synchronized output, trace and statistics, interrupts."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_support import SYSTEM_PYTHON, module_env, needs_module, shm_left_over, shm_objects

pytestmark = needs_module

TIMEOUT = 60


def spawnpool_run(args, cwd, stdin=None, merged=False, env=None):
    """Run the CLI; returns (status, stdout, stderr) as text (stderr None if merged)."""
    r = subprocess.run([SYSTEM_PYTHON, '-m', 'spawnpool', 'run'] + list(args), cwd=cwd,
                       input=stdin, capture_output=not merged,
                       stdout=subprocess.PIPE if merged else None,
                       stderr=subprocess.STDOUT if merged else None,
                       env=env or module_env(), timeout=TIMEOUT)
    return (r.returncode, r.stdout.decode(errors='replace'),
            None if merged else r.stderr.decode(errors='replace'))


def write_lines(path, lines):
    path.write_text(''.join(line + '\n' for line in lines))
    return path


def test_runs_every_line(tmp_path):
    cmds = write_lines(tmp_path / 'cmds', ['touch a', '', 'echo hello', '   ', 'touch "b c"'])
    rc, out, err = spawnpool_run(['-j', '2', str(cmds)], tmp_path)
    assert (rc, out, err) == (0, 'hello\n', '')
    assert (tmp_path / 'a').exists() and (tmp_path / 'b c').exists()


def test_reads_stdin(tmp_path):
    for args in ([], ['-']):
        rc, out, err = spawnpool_run(args + ['-j1'], tmp_path, stdin=b'echo one\necho two\n')
        assert (rc, out, err) == (0, 'one\ntwo\n', '')


def test_first_failure_stops_new_commands(tmp_path):
    cmds = write_lines(tmp_path / 'cmds', ['echo first', 'exit 2', 'touch never'])
    rc, out, err = spawnpool_run(['-j1', str(cmds)], tmp_path)
    assert rc == 1
    assert out == 'first\n'
    assert err == 'spawnpool: *** [line 2] Error 2: exit 2\n'
    assert not (tmp_path / 'never').exists()


def test_keep_going_runs_the_rest(tmp_path):
    cmds = write_lines(tmp_path / 'cmds', ['exit 2', 'no_such_program_for_the_test',
                                           'touch after'])
    rc, out, err = spawnpool_run(['-j1', '-k', str(cmds)], tmp_path)
    assert rc == 1
    assert err == ('spawnpool: *** [line 1] Error 2: exit 2\n'
                   '/bin/sh: 1: no_such_program_for_the_test: not found\n'
                   'spawnpool: *** [line 2] Error 127: no_such_program_for_the_test\n')
    assert (tmp_path / 'after').exists()


def test_running_commands_finish_after_a_failure(tmp_path):
    cmds = write_lines(tmp_path / 'cmds', ['sleep 0.5; touch slow_done', 'exit 5',
                                           'sleep 1; touch not_started'])
    rc, out, err = spawnpool_run(['-j2', str(cmds)], tmp_path)
    assert rc == 1
    assert err == ('spawnpool: *** [line 2] Error 5: exit 5\n'
                   'spawnpool: *** Waiting for unfinished jobs....\n')
    assert (tmp_path / 'slow_done').exists()
    assert not (tmp_path / 'not_started').exists()


def chatty(tag, n=20):
    """A command that alternates stdout and stderr lines, pausing between them."""
    return ('i=0; while [ $i -lt %d ]; do echo "%s out $i"; echo "%s err $i" >&2; '
            'i=$((i+1)); sleep 0.002; done' % (n, tag, tag))


def blocks(lines, tags):
    """The order in which tags' lines appear, runs collapsed: one entry per block."""
    order = []
    for line in lines:
        tag = line.split()[0]
        assert tag in tags, line
        if not order or order[-1] != tag:
            order.append(tag)
    return order


def test_sync_output_merged_keeps_write_order(tmp_path):
    tags = ['A', 'B', 'C', 'D']
    cmds = write_lines(tmp_path / 'cmds', [chatty(t) for t in tags])
    rc, out, _ = spawnpool_run(['-j4', '--output=sync', str(cmds)], tmp_path, merged=True)
    assert rc == 0
    lines = out.splitlines()
    assert sorted(blocks(lines, tags)) == tags, out      # one block per command
    for tag in tags:
        mine = [line for line in lines if line.startswith(tag + ' ')]
        expected = []
        for i in range(20):
            expected += ['%s out %d' % (tag, i), '%s err %d' % (tag, i)]
        assert mine == expected                          # stdout/stderr in write order


def test_sync_output_separate_streams(tmp_path):
    tags = ['A', 'B', 'C']
    cmds = write_lines(tmp_path / 'cmds', [chatty(t) for t in tags])
    rc, out, err = spawnpool_run(['-j3', '--output=sync', str(cmds)], tmp_path)
    assert rc == 0
    assert sorted(blocks(out.splitlines(), tags)) == tags, out
    assert sorted(blocks(err.splitlines(), tags)) == tags, err
    assert all(' out ' in line for line in out.splitlines())
    assert all(' err ' in line for line in err.splitlines())


def test_sync_output_prints_the_launchers_message_after_the_block(tmp_path):
    """The launcher's failure message is about the command: it follows the command's
    block, as make -O puts make's own line after a target's output."""
    launcher = tmp_path / 'fake-launcher'
    launcher.write_text('#!/bin/sh\necho "fake-launcher: cannot run $1"\nexit 126\n')
    launcher.chmod(0o755)
    cmds = write_lines(tmp_path / 'cmds', ['cc -c a.c'])
    rc, out, _ = spawnpool_run(['-j1', '--output=sync', '--launcher=%s' % launcher, str(cmds)],
                               tmp_path, merged=True)
    assert rc == 1
    assert out.splitlines()[:3] == [
        'fake-launcher: cannot run cc',
        'spawnpool: fake-launcher could not be executed (exit 126) for: cc -c a.c',
        'spawnpool: *** [line 1] Error 126: cc -c a.c'], out
    assert '1 failed in fake-launcher' in out.splitlines()[3], out    # the summary


def test_passthrough_interleaves(tmp_path):
    """The default: output as written (here: both commands' lines all arrive)."""
    cmds = write_lines(tmp_path / 'cmds', [chatty('A', 5), chatty('B', 5)])
    rc, out, _ = spawnpool_run(['-j2', str(cmds)], tmp_path, merged=True)
    assert rc == 0
    assert len(out.splitlines()) == 20


def read_trace(path):
    data = json.loads(path.read_text())
    return [e for e in data['traceEvents'] if e.get('cat') == 'command']


def test_sync_output_and_the_trace_both_get_a_failed_commands_output(tmp_path):
    """The sync layer prints the block and leaves the bytes to the trace above it (the
    report shows a failed command's output); the console gets the block once."""
    cmds = write_lines(tmp_path / 'cmds', ['echo boom; echo bang >&2; exit 3'])
    trace = tmp_path / 'trace.json'
    rc, out, _ = spawnpool_run(['--output=sync', '--trace=%s' % trace, str(cmds)], tmp_path,
                               merged=True)
    assert rc == 1
    assert out.splitlines()[:2] == ['boom', 'bang'], out
    [event] = read_trace(trace)
    assert event['args']['output'] == 'boom\nbang\n'


def test_trace_has_one_event_per_command(tmp_path):
    cmds = write_lines(tmp_path / 'cmds', ['sleep 0.05', 'exit 3', 'true', 'echo x'])
    trace = tmp_path / 'trace.json'
    rc, _, _ = spawnpool_run(['-j2', '-k', '--trace=%s' % trace, str(cmds)], tmp_path)
    assert rc == 1
    events = read_trace(trace)
    assert sorted(e['args']['command'] for e in events) == sorted(
        ['sleep 0.05', 'exit 3', 'true', 'echo x'])
    for e in events:
        assert e['ph'] == 'X' and e['tid'] in (0, 1) and e['dur'] >= 0 and e['ts'] >= 0
        assert set(e['args']) >= {'returncode', 'user_time_s', 'system_time_s', 'max_rss_kb',
                                  'queue_wait_ms', 'pool_overhead_ms'}
    by_command = {e['args']['command']: e for e in events}
    assert by_command['exit 3']['args']['returncode'] == 3
    assert by_command['sleep 0.05']['dur'] >= 40000          # microseconds
    names = json.loads(trace.read_text())['traceEvents']
    assert {'name': 'slot 0'} in [e['args'] for e in names if e['name'] == 'thread_name']


def test_report_from_the_engines_temporary_trace_and_its_warnings(tmp_path):
    """--report without --trace: the engine records a trace of its own for it, in $TMPDIR,
    and leaves nothing there; a report that cannot be written is a warning at the end
    (it was lost before: only the warnings of the start were printed), the build's
    status unchanged."""
    cmds = write_lines(tmp_path / 'cmds', ['echo built'])
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    env = dict(module_env(), TMPDIR=str(tmp))
    rc, out, err = spawnpool_run(['--report=r.html', str(cmds)], tmp_path, env=env)
    assert (rc, out, err) == (0, 'built\n', '')
    assert 'echo built' in (tmp_path / 'r.html').read_text()
    assert list(tmp.iterdir()) == []
    rc, out, err = spawnpool_run(['--report=no-dir/r.html', str(cmds)], tmp_path, env=env)
    assert (rc, out) == (0, 'built\n')
    assert err.startswith('spawnpool: --report: cannot write %s' % (tmp_path / 'no-dir')), err
    assert list(tmp.iterdir()) == []
    env['TMPDIR'] = str(tmp_path / 'missing')
    rc, out, err = spawnpool_run(['--report=r2.html', str(cmds)], tmp_path, env=env)
    assert (rc, out) == (0, 'built\n')
    assert err == ('spawnpool: --report: cannot record the build in %s: No such file or '
                   'directory\n' % (tmp_path / 'missing')), err
    assert not (tmp_path / 'r2.html').exists()


def test_stats(tmp_path):
    cmds = write_lines(tmp_path / 'cmds', ['sleep 0.2', 'sleep 0.1', 'exit 1', 'true'])
    rc, _, err = spawnpool_run(['-j2', '-k', '--stats', str(cmds)], tmp_path)
    assert rc == 1
    assert 'spawnpool: statistics' in err
    assert 'commands:           4 run, 1 failed' in err
    assert 'slot utilization:' in err and '(2 slots' in err
    longest = err[err.index('longest commands:'):].splitlines()[1:]
    assert longest[0].endswith('sleep 0.2') and longest[1].endswith('sleep 0.1'), err
    assert len(longest) == 4


def test_usage_errors(tmp_path):
    assert spawnpool_run(['-j', '0'], tmp_path)[0] == 2
    assert spawnpool_run(['--output=fancy'], tmp_path)[0] == 2
    rc, _, err = spawnpool_run([str(tmp_path / 'missing')], tmp_path)
    assert rc == 2 and 'missing' in err


def start_sleepers(tmp_path, *extra):
    """The CLI running `true` and then sleeps, in a session of its own (as from a terminal)."""
    cmds = write_lines(tmp_path / 'cmds', ['true', 'sleep 30', 'sleep 30', 'sleep 30'])
    proc = subprocess.Popen([SYSTEM_PYTHON, '-m', 'spawnpool', 'run', '-j2',
                             '--trace=%s' % (tmp_path / 'trace.json')] + list(extra)
                            + [str(cmds)], cwd=tmp_path, env=module_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while _running_commands(proc.pid).count('sleep 30') < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def finish(proc):
    """(stdout, stderr) once it exits; whatever is left of its session is then killed."""
    try:
        return proc.communicate(timeout=20)
    finally:
        deadline = time.monotonic() + 10
        while _running_commands(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _running_commands(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        assert not left, 'left behind: ' + left


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_interrupt_cancels_and_leaves_a_valid_trace(tmp_path, signum):
    before = shm_objects()
    proc = start_sleepers(tmp_path, '--stats')
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)     # a terminal's Ctrl-C: the whole foreground group
    else:
        proc.send_signal(signum)        # SIGTERM to the runner alone: it cancels
    out, err = finish(proc)
    name = signal.strsignal(signum) if signum != signal.SIGINT else 'Interrupt'
    assert proc.returncode == 128 + signum, err
    assert err.count(b'] %s: sleep 30' % name.encode()) == 2, err
    assert b'spawnpool: *** %s\n' % name.encode() in err
    assert b'spawnpool: statistics' in err
    events = read_trace(tmp_path / 'trace.json')    # valid JSON, holding what finished
    assert sorted(e['args']['command'] for e in events) == ['sleep 30', 'sleep 30', 'true']
    assert not shm_left_over(before)


def test_killed_runner_leaves_a_valid_trace(tmp_path):
    proc = start_sleepers(tmp_path)
    proc.kill()         # no handler runs: the spawners see the lifeline close
    finish(proc)
    events = read_trace(tmp_path / 'trace.json')
    assert [e['args']['command'] for e in events] == ['true']


def _running_commands(pid):
    """Command lines of the processes in the session `pid` leads, but for itself."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/cmdline' % entry, 'rb') as f:
                    cmd = f.read().replace(b'\0', b' ').decode(errors='replace')
                with open('/proc/%s/stat' % entry, 'rb') as f:
                    sid = int(f.read().rsplit(b')', 1)[1].split()[3])
            except (OSError, IndexError, ValueError):
                continue
            if sid == pid and int(entry) != pid:
                found.append(cmd)
    return ' | '.join(found)


def test_module_help():
    r = subprocess.run([SYSTEM_PYTHON, '-m', 'spawnpool', 'run', '--help'], env=module_env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0
    for option in ('-j', '--keep-going', '--output', '--trace', '--stats', '--direct-exec'):
        assert option in r.stdout


if __name__ == '__main__':
    sys.exit(pytest.main([__file__]))
