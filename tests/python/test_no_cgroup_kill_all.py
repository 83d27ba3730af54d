"""Kill-all without cgroups (issue 17 item 6): with a memory budget but no slot cgroups
(SPAWNPOOL_DISABLE_CGROUPS=1 takes the same path as a read-only or unwritable tree), each
spawner is its descendants' subreaper, so a process that left its command's process
group and session (setsid, its parent gone) becomes the spawner's child, and cancel and
close end it.  Without a memory budget nothing changes: it goes to init, as under stock
SCons (the last case shows that boundary, and ends the process itself).

The leak check (conftest.py) also sees every process of the test: they carry its marker.
"""

import os
import signal
import threading

from spawnpool import CAPTURE, Command, Pool

from spawnpool_test_support import process_gone, proc_stat, wait_until

# The subshell starts `sleep` in a session of its own (no job control: setsid(1) runs it
# in place), prints its pid and exits; sh then exits too, and sleep is an orphan outside
# the command's group and session.
ESCAPE = '(setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!)'


def escaped_pid(pool, line=ESCAPE):
    result = pool.run(Command(['/bin/sh', '-c', line], output=CAPTURE))
    assert result.returncode == 0, result
    return int(result.stdout.split()[0])


def without_cgroups(monkeypatch):
    monkeypatch.setenv('SPAWNPOOL_DISABLE_CGROUPS', '1')
    return Pool(slots=2, memory_budget='auto')


def test_close_ends_what_left_the_group(monkeypatch):
    pool = without_cgroups(monkeypatch)
    try:
        pid = escaped_pid(pool)
        # Its parent exited: the spawner (its subreaper) inherited it, not init.
        assert wait_until(lambda: proc_stat(pid)[1] in pool.spawner_pids, timeout=5), \
            (proc_stat(pid), pool.spawner_pids)
    finally:
        pool.close()
    assert wait_until(lambda: process_gone(pid), timeout=5), proc_stat(pid)


def test_cancel_reaches_what_left_the_group(monkeypatch, tmp_path):
    pool = without_cgroups(monkeypatch)
    try:
        line = 'setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $! > pid; wait'
        results = []
        cwd = str(tmp_path)
        runner = threading.Thread(target=lambda: results.append(
            pool.run(Command(['/bin/sh', '-c', line], cwd=cwd, output=CAPTURE))))
        pid_file = os.path.join(cwd, 'pid')
        runner.start()
        assert wait_until(lambda: os.path.exists(pid_file) and open(pid_file).read().strip())
        pid = int(open(pid_file).read())
        # Still the command's (sh waits for it), in a session of its own: the group kill
        # misses it, the walk of the spawner's descendants does not.
        assert proc_stat(pid)[0] not in (None, 'Z')
        pool.cancel(signal.SIGTERM)
        runner.join(timeout=30)
        assert not runner.is_alive()
        assert wait_until(lambda: process_gone(pid), timeout=5), proc_stat(pid)
        assert results[0].returncode == -signal.SIGTERM, results
    finally:
        pool.close()


def test_without_a_memory_budget_it_is_left_alone(monkeypatch):
    pool = Pool(slots=1)
    pid = None
    try:
        pid = escaped_pid(pool)
        assert wait_until(lambda: proc_stat(pid)[1] not in (None, *pool.spawner_pids))
        pool.close()
        assert not process_gone(pid)    # as under stock SCons: a daemon outlives the build
    finally:
        pool.close()
        if pid is not None and not process_gone(pid):
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: process_gone(pid), timeout=5)
