"""The pool's admission as a distributed build uses it: local slots (the Gate marks a
launched compile as not local), interrupts (Pool.interrupt, the session's), and a stop
signal the pool reads from the signal watch's pipe before its handler has run.  make's
tokens: test_jobserver.py."""

import os
import signal
import threading
import time

import pytest

from dist_support import module_problem, most_ran_at_once, run_on_threads, write_script

_skip, _failure = module_problem()
if _skip:
    pytest.skip(_skip, allow_module_level=True)

from spawnpool import Command, Pool, options  # noqa: E402
from spawnpool.gate import Gate  # noqa: E402
from spawnpool.launcher import Launcher  # noqa: E402
from spawnpool.stack import Session  # noqa: E402

pytestmark = pytest.mark.usefixtures('no_leaks')
WAIT = 30       # seconds: generous bound for "this should have happened by now"
ENV = {'PATH': '/usr/bin:/bin'}


def sh(line, local=True):
    return Command(['sh', '-c', line], ENV, '/', 'passthrough', local)


def wait_for(path):
    deadline = time.monotonic() + WAIT
    while not os.path.exists(path):
        assert time.monotonic() < deadline, '%s never appeared' % path
        time.sleep(0.02)


def test_local_slots_bound_local_commands_only(tmp_path):
    write_script(tmp_path / 'slow_launcher.sh', '#!/bin/sh\nsleep 1\n')
    with Pool(slots=6, local_slots=2) as pool:
        gate = Gate(pool, Launcher('slow_launcher.sh', path=str(tmp_path)))
        commands = [sh('sleep 1') for _ in range(6)] + \
                   [sh('gcc -c f%d.c -o f%d.o' % (i, i)) for i in range(6)]
        results = run_on_threads(gate, commands)
    assert [r.returncode for r in results] == [0] * 12, results
    local, launched = results[:6], results[6:]
    assert most_ran_at_once(local) == 2
    assert most_ran_at_once(launched) >= 3      # counted as remote: not bounded by 2
    assert most_ran_at_once(results) <= 6
    assert any(r.local_slot_wait_ns > 0 for r in local)
    assert not any(r.local_slot_wait_ns for r in launched)
    assert gate.launched == 6 and gate.local_commands == 6


def test_interrupt_stops_waiting_commands(tmp_path):
    go, started, log = tmp_path / 'go', tmp_path / 'started', tmp_path / 'log'
    with Pool(slots=4, local_slots=1) as pool:
        first = []
        thread = threading.Thread(target=lambda: first.append(pool.run(sh(
            'echo first >> %s; touch %s; while [ ! -e %s ]; do sleep 0.02; done'
            % (log, started, go)))))
        thread.start()
        wait_for(started)
        waiters = run_threads_later(pool, [sh('echo w%d >> %s' % (i, log)) for i in range(3)])
        time.sleep(0.3)                     # queued or not: later commands see it too
        pool.interrupt(signal.SIGTERM)
        results = waiters()
        go.touch()
        thread.join(WAIT)
        later = pool.run(sh('echo later >> %s' % log))
    assert [r.returncode for r in results] == [-signal.SIGTERM] * 3
    assert later.returncode == -signal.SIGTERM
    assert first[0].returncode == 0         # a running command is left alone
    assert log.read_text() == 'first\n'


def run_threads_later(runner, commands):
    """Starts run_on_threads(runner, commands) now; returns the call that waits for it."""
    done = {}
    thread = threading.Thread(target=lambda: done.setdefault('results',
                                                             run_on_threads(runner, commands)))
    thread.start()

    def results():
        thread.join(WAIT)
        return done['results']
    return results


def test_signal_byte_stops_the_next_command(tmp_path):
    """The pool reads the signal watch's pipe (interrupts.py) right before a command
    starts: a stop signal there starts nothing more, before Python ran its handler."""
    log = tmp_path / 'log'
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        with Pool(slots=1, stop_signal_fd=r) as pool:
            os.write(w, bytes([signal.SIGUSR1]))    # not a stop signal: ignored
            assert pool.run(sh('echo one >> %s' % log)).returncode == 0
            os.write(w, bytes([signal.SIGINT]))
            assert pool.run(sh('echo two >> %s' % log)).returncode == -signal.SIGINT
            assert pool.run(sh('echo three >> %s' % log)).returncode == -signal.SIGINT
    finally:
        os.close(r)
        os.close(w)
    assert log.read_text() == 'one\n'


def test_session_hands_the_pool_its_admission(tmp_path):
    """Session.pool_options() gives the pool the local slots; session.interrupt(SIGTERM)
    reaches the pool: the running command is cancelled, the waiting one never starts."""
    started, log = tmp_path / 'started', tmp_path / 'log'
    warnings = []
    session = Session(options.Settings(local=1, direct_exec='no'), 2, warnings.append)
    assert session.pool_options() == dict(jobserver=None, local_slots=1, stop_signal_fd=None)
    with Pool(slots=2, **session.pool_options()) as pool:
        runner = session.start(pool)
        results = run_threads_later(runner, [
            sh('echo first >> %s; touch %s; exec sleep %d' % (log, started, WAIT))])
        wait_for(started)
        second = run_threads_later(runner, [sh('echo second >> %s' % log)])
        time.sleep(0.3)
        session.interrupt(signal.SIGTERM)
        assert results()[0].returncode == -signal.SIGTERM     # cancelled
        assert second()[0].returncode == -signal.SIGTERM      # never started
    session.finish()
    assert log.read_text() == 'first\n' and warnings == []


def test_a_launcher_alone_bounds_local_commands_by_the_cpus(tmp_path):
    write_script(tmp_path / 'slow_launcher.sh', '#!/bin/sh\nexit 0\n')
    session = Session(options.Settings(launcher=str(tmp_path / 'slow_launcher.sh')), 8,
                      print)
    assert session.pool_options()['local_slots'] == len(os.sched_getaffinity(0))
    assert Session(options.Settings(), 8, print).pool_options()['local_slots'] == 0
