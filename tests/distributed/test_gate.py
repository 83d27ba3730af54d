"""CommandGate with a fake pool: local slots, the launcher's rewriting, messages, counts."""

import os
import signal
import threading
import time

import pytest

from dist_support import module_problem

_skip, _failure = module_problem()
if _skip:
    pytest.skip(_skip, allow_module_level=True)

from spawnpool.gate import CommandGate, GateInterrupted, LocalSlots  # noqa: E402
from spawnpool.jobserver import JobserverClient  # noqa: E402
from spawnpool.launcher import Launcher  # noqa: E402


class FakeResult:
    def __init__(self, returncode, stdout=b'', stderr=b''):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


class FakePool:
    """Runs nothing: records each argv/env/options, sleeps, returns a scripted result."""

    def __init__(self, seconds=0.0, result=None):
        self.seconds = seconds
        self.result = result or (lambda argv: FakeResult(0))
        self.calls = []
        self._lock = threading.Lock()
        self.now = {'local': 0, 'launched': 0}
        self.most = {'local': 0, 'launched': 0}

    def run(self, argv, env=None, cwd=None, capture=False, merge_stderr=False):
        kind = 'launched' if 'distcc' in argv[-1] else 'local'
        with self._lock:
            self.calls.append((argv, env, capture))
            self.now[kind] += 1
            self.most[kind] = max(self.most[kind], self.now[kind])
        time.sleep(self.seconds)
        with self._lock:
            self.now[kind] -= 1
        return self.result(argv)


def sh(line):
    return ['sh', '-c', line]


def run_threads(gate, pool, lines, env=None):
    statuses = {}

    def one(i, line):
        statuses[i] = gate.run(pool, sh(line), env or {'PATH': '/usr/bin:/bin'}, '/')

    threads = [threading.Thread(target=one, args=(i, line)) for i, line in enumerate(lines)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return [statuses[i] for i in range(len(lines))]


def test_local_slots_bound_local_commands_only():
    gate = CommandGate(Launcher('distcc', path='/usr/bin:/bin'), LocalSlots(2))
    pool = FakePool(seconds=0.1)
    lines = ['ar rc lib%d.a x.o' % i for i in range(6)] + \
            ['gcc -c f%d.c -o f%d.o' % (i, i) for i in range(6)]
    assert run_threads(gate, pool, lines) == [0] * 12
    assert pool.most['local'] == 2
    assert pool.most['launched'] >= 3       # compiles count as remote: not bounded by 2
    assert gate.launched == 6 and gate.local_commands == 6
    assert gate.local_slots.max_seen == 2


def test_launcher_rewrites_compiles_and_adds_driver_env(monkeypatch):
    monkeypatch.setenv('DISTCC_HOSTS', 'somehost')
    monkeypatch.setenv('HOME', '/home/someone')
    gate = CommandGate(Launcher('distcc', path='/usr/bin:/bin'))
    pool = FakePool()
    env = {'PATH': '/usr/bin:/bin'}
    assert gate.run(pool, sh('gcc -o a.o -c a.c'), env, '/') == 0
    assert gate.run(pool, sh('gcc -o prog a.o'), env, '/') == 0
    (compile_argv, compile_env, captured), (link_argv, link_env, _) = pool.calls
    assert compile_argv == ['sh', '-c', gate.launcher.prefix + ' gcc -o a.o -c a.c']
    assert compile_env['DISTCC_HOSTS'] == 'somehost'
    assert compile_env['HOME'] == '/home/someone'
    assert captured                         # distcc: output captured to spot fallbacks
    assert link_argv == sh('gcc -o prog a.o') and link_env is env
    assert env == {'PATH': '/usr/bin:/bin'}


def test_launcher_failure_is_named(capfd):
    gate = CommandGate(Launcher('distcc', path='/usr/bin:/bin'))
    pool = FakePool(result=lambda argv: FakeResult(116, stderr=b'distcc[1] ERROR: x\n'))
    assert gate.run(pool, sh('gcc -c a.c'), {}, '/') == 116
    out, err = capfd.readouterr()
    assert 'distcc[1] ERROR: x\n' in err    # the command's own output, then ours
    assert err.endswith('spawnpool: distcc failed to distribute (exit 116) for: '
                        'gcc -c a.c\n')
    assert gate.launcher_failed == 1


def test_fallbacks_counted():
    warning = (b'distcc[9] (dcc_build_somewhere) Warning: failed to distribute, '
               b'running locally instead\n')
    results = iter([FakeResult(0, stderr=warning), FakeResult(0)])
    gate = CommandGate(Launcher('distcc', path='/usr/bin:/bin'))
    pool = FakePool(result=lambda argv: next(results))
    gate.run(pool, sh('gcc -c a.c'), {}, '/')
    gate.run(pool, sh('gcc -c b.c'), {}, '/')
    assert (gate.launched, gate.ran_locally, gate.launcher_failed) == (2, 1, 0)
    summary = '\n'.join(gate.summary())
    assert '2 compiles through distcc, 1 of them compiled locally' in summary


class FakeRunner:
    """Stands for spawnpool.ShellRunner in sync mode: captures and keeps the output."""

    def __init__(self):
        self.results = []

    def run(self, pool, argv, env, cwd):
        r = pool.run(argv, env=env, cwd=cwd, capture=True, merge_stderr=True)
        self.results.append(r)
        return r.returncode


def test_runner_that_captures_gets_the_output(capfd):
    warning = b'distcc[9] Warning: failed to distribute, running locally instead\n'
    gate = CommandGate(Launcher('distcc', path='/usr/bin:/bin'))
    pool = FakePool(result=lambda argv: FakeResult(0, stdout=warning))
    runner = FakeRunner()
    assert gate.run(pool, sh('gcc -c a.c'), {}, '/', runner) == 0
    assert runner.results[0].stdout == warning
    assert capfd.readouterr() == ('', '')   # the runner prints it, not the gate
    assert gate.ran_locally == 1


def test_interrupt_stops_waiting_commands():
    r, w = os.pipe()                        # a -j1 jobserver: no tokens
    client = JobserverClient.from_environ({'MAKEFLAGS': '-j1 --jobserver-auth=%d,%d' % (r, w)})
    gate = CommandGate(None, LocalSlots(4), client)
    pool = FakePool(seconds=0.5)
    started = []
    statuses = []

    def command(line):
        statuses.append(gate.run(pool, sh(line), {}, '/'))

    first = threading.Thread(target=command, args=('first',))
    first.start()
    time.sleep(0.1)
    waiters = [threading.Thread(target=command, args=('w%d' % i,)) for i in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.1)
    gate.interrupt(signal.SIGTERM)
    for t in [first] + waiters:
        t.join(10)
    started = [argv[-1] for argv, _, _ in pool.calls]
    assert started == ['first']
    assert sorted(statuses) == [-signal.SIGTERM] * 3 + [0]
    gate.close()
    os.close(r)
    os.close(w)


def test_signal_byte_stops_the_next_command():
    r, w = os.pipe()
    os.set_blocking(r, False)
    gate = CommandGate(None, LocalSlots(1))
    gate.watch_signals(r)
    pool = FakePool()
    os.write(w, bytes([signal.SIGUSR1]))    # not an interrupt: ignored
    assert gate.run(pool, sh('one'), {}, '/') == 0
    os.write(w, bytes([signal.SIGINT]))
    assert gate.run(pool, sh('two'), {}, '/') == -signal.SIGINT
    assert gate.run(pool, sh('three'), {}, '/') == -signal.SIGINT
    assert [argv[-1] for argv, _, _ in pool.calls] == ['one']
    os.close(r)
    os.close(w)


def test_local_slots_reject_zero():
    with pytest.raises(ValueError):
        LocalSlots(0)


def test_local_slots_interrupt_inside_their_lock():
    slots = LocalSlots(1)
    done = threading.Event()

    def handler_inside_lock():
        with slots._cond:
            slots.interrupt()
        done.set()

    threading.Thread(target=handler_inside_lock, daemon=True).start()
    assert done.wait(10), 'interrupt() deadlocked on the slots lock'
    with pytest.raises(GateInterrupted):
        slots.acquire()
