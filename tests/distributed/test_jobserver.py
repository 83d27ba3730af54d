"""The pool with make's jobserver (the engine's client, jobserver.py) against jobservers
made here: a pipe (make 4.3, both spellings) and a fifo (make 4.4).  How MAKEFLAGS is
parsed, tokens and the fifo at the client's level: the C++ unit tests
(tests/unit/jobserver/)."""

import fcntl
import os
import signal
import threading
import time

import pytest

from dist_support import module_problem, most_ran_at_once, run_on_threads

_skip, _failure = module_problem()
if _skip:
    pytest.skip(_skip, allow_module_level=True)

from spawnpool import Command, Pool, jobserver  # noqa: E402

pytestmark = pytest.mark.usefixtures('no_leaks')
WAIT = 30       # seconds: generous bound for "this should have happened by now"


def client_for(makeflags):
    return jobserver.from_environ({'MAKEFLAGS': makeflags})


class PipeJobserver:
    """What make -jN sets up: a pipe holding N-1 tokens."""

    def __init__(self, jobs, token=b'+'):
        self.r, self.w = os.pipe()
        os.set_inheritable(self.r, True)
        os.set_inheritable(self.w, True)
        os.write(self.w, token * (jobs - 1))
        self.makeflags = ' -j%d --jobserver-auth=%d,%d' % (jobs, self.r, self.w)

    def tokens(self):
        """Drain and return the tokens in the pipe (without blocking make's fd)."""
        fd = os.open('/proc/self/fd/%d' % self.r, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return os.read(fd, 4096)
        except BlockingIOError:
            return b''
        finally:
            os.close(fd)

    def close(self):
        os.close(self.r)
        os.close(self.w)


class FifoJobserver:
    """What make 4.4 -jN sets up: a named pipe holding N-1 tokens."""

    def __init__(self, path, jobs, token=b'+'):
        os.mkfifo(path, 0o600)
        self.path = path
        self.keep = os.open(path, os.O_RDWR)     # make keeps it open
        os.write(self.keep, token * (jobs - 1))
        self.makeflags = '-j%d --jobserver-auth=fifo:%s' % (jobs, path)

    def tokens(self):
        os.set_blocking(self.keep, False)
        try:
            return os.read(self.keep, 4096)
        except BlockingIOError:
            return b''
        finally:
            os.set_blocking(self.keep, True)

    def close(self):
        os.close(self.keep)


@pytest.fixture(params=['pipe', 'fds', 'fifo'])
def jobserver4(request, tmp_path):
    """A -j4 jobserver in each form."""
    if request.param == 'fifo':
        js = FifoJobserver(str(tmp_path / 'fifo'), 4)
    else:
        js = PipeJobserver(4)
        if request.param == 'fds':
            js.makeflags = js.makeflags.replace('-auth=', '-fds=')
    yield js
    js.close()


def sh(line):
    return Command(['sh', '-c', line], {'PATH': '/usr/bin:/bin'}, '/')


def run_commands(pool, lines):
    """Runs each line on a thread of its own; their Results, in order."""
    return run_on_threads(pool, [sh(line) for line in lines])


def wait_until(predicate, what):
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_never_more_than_make_allows(jobserver4):
    client = client_for(jobserver4.makeflags)
    assert client.usable, client.problem
    with Pool(slots=8, jobserver=client) as pool:
        results = run_commands(pool, ['sleep 0.3'] * 12)
    assert [r.returncode for r in results] == [0] * 12
    assert most_ran_at_once(results) <= 4   # the implicit slot + make's 3 tokens
    assert client.max_running == 4          # ... all used
    assert any(r.jobserver_wait_ns > 0 for r in results)
    assert client.tokens_held == 0
    assert jobserver4.tokens() == b'+++'    # every token went back


def test_returns_the_bytes_it_read():
    js = PipeJobserver(1)
    os.write(js.w, b'ab')               # make may use different token bytes
    client = client_for(js.makeflags)
    with Pool(slots=3, jobserver=client) as pool:
        results = run_commands(pool, ['sleep 0.5'] * 3)
    assert [r.returncode for r in results] == [0] * 3
    assert client.max_running == 3 and client.tokens_held == 0
    assert sorted(js.tokens()) == sorted(b'ab')
    js.close()


def test_private_descriptors_leave_makes_fds_alone():
    js = PipeJobserver(2)
    flags = fcntl.fcntl(js.r, fcntl.F_GETFL)
    client = client_for(js.makeflags)
    with Pool(slots=2, jobserver=client) as pool:
        results = run_commands(pool, ['sleep 0.3'] * 2)    # one reads a token
    assert [r.returncode for r in results] == [0, 0] and client.max_running == 2
    assert fcntl.fcntl(js.r, fcntl.F_GETFL) == flags     # still blocking for make
    assert os.get_inheritable(js.r) and os.get_inheritable(js.w)
    client.keep_from_commands()
    assert not os.get_inheritable(js.r) and not os.get_inheritable(js.w)
    assert js.tokens() == b'+'
    js.close()


def test_freed_implicit_slot_starts_a_waiter():
    js = PipeJobserver(1)               # -j1: no tokens at all
    client = client_for(js.makeflags)
    with Pool(slots=2, jobserver=client) as pool:
        results = run_commands(pool, ['sleep 0.3'] * 2)
    assert [r.returncode for r in results] == [0, 0]
    assert most_ran_at_once(results) == 1 and client.max_running == 1
    assert max(r.jobserver_wait_ns for r in results) > 0     # the second one waited
    assert js.tokens() == b''           # never took a token that did not exist
    js.close()


def test_interrupt_and_return_all_give_make_its_tokens(tmp_path):
    js = FifoJobserver(str(tmp_path / 'fifo'), 3)
    client = client_for(js.makeflags)
    go, log = tmp_path / 'go', tmp_path / 'log'
    hold = 'echo %%s >> %s; while [ ! -e %s ]; do sleep 0.02; done' % (log, go)
    outcome = {}
    with Pool(slots=4, jobserver=client) as pool:
        running = threading.Thread(target=lambda: outcome.setdefault(
            'running', run_commands(pool, [hold % i for i in range(3)])))
        running.start()
        wait_until(lambda: client.tokens_held == 2, 'the commands never took both tokens')
        assert js.tokens() == b''
        waiter = threading.Thread(target=lambda: outcome.setdefault(
            'waiter', pool.run(sh('echo waiter >> %s' % log))))
        waiter.start()
        time.sleep(0.3)                 # queued for a token (or later: the same outcome)
        pool.interrupt(signal.SIGINT)
        waiter.join(WAIT)
        assert outcome['waiter'].returncode == -signal.SIGINT
        assert pool.run(sh('echo later >> %s' % log)).returncode == -signal.SIGINT
        client.return_all()             # make gets its tokens back at once
        assert js.tokens() == b'++'
        go.touch()                      # the commands end later: nothing more written
        running.join(WAIT)
    assert [r.returncode for r in outcome['running']] == [0] * 3
    assert js.tokens() == b''
    assert sorted(log.read_text().split()) == ['0', '1', '2']
    js.close()


def test_unavailable_pipe_means_one_command_at_a_time():
    r, w = os.pipe()
    os.close(r)
    os.close(w)                         # what make 4.3 does for a non-recursive line
    client = client_for('-j4 --jobserver-auth=%d,%d' % (r, w))
    assert not client.usable
    assert 'unavailable' in client.problem and "'+'" in client.hint
    assert client.claim_warning() and not client.claim_warning()    # said once
    with Pool(slots=4, jobserver=client) as pool:
        results = run_commands(pool, ['sleep 0.2'] * 4)
    assert [r.returncode for r in results] == [0] * 4
    assert most_ran_at_once(results) == 1 and client.max_running == 1


def test_not_a_pipe_is_refused(tmp_path):
    path = tmp_path / 'plain'
    path.write_text('')
    fd = os.open(path, os.O_RDWR)
    try:
        client = client_for('-j4 --jobserver-auth=%d,%d' % (fd, fd))
        assert not client.usable and 'not a pipe' in client.problem
        del client
    finally:
        os.close(fd)
    client = client_for('-j4 --jobserver-auth=fifo:%s' % path)
    assert not client.usable and 'not a fifo' in client.problem


def test_no_jobserver_no_client(monkeypatch):
    assert client_for(' -j4') is None
    assert jobserver.from_environ({}) is None
    monkeypatch.setenv('MAKEFLAGS', ' -j2')
    assert jobserver.from_environ() is None
