"""JobserverClient against jobservers made here: a pipe (make 4.3) and a fifo (make 4.4)."""

import fcntl
import os
import threading
import time

import pytest

from dist_support import module_problem

_skip, _failure = module_problem()
if _skip:
    pytest.skip(_skip, allow_module_level=True)

from spawnpool.jobserver import (JobserverClient, JobserverInterrupted,  # noqa: E402
                                 parse_makeflags)

WAIT = 10       # seconds: generous bound for "this should have happened by now"


@pytest.mark.parametrize('makeflags, expected', [
    (None, None),
    ('', None),
    (' -j4', None),
    (' -j4 --jobserver-auth=3,4', ('pipe', 3, 4)),
    ('s -j4 --jobserver-fds=5,6', ('pipe', 5, 6)),
    ('-j4 --jobserver-auth=fifo:/tmp/GMfifo1234', ('fifo', '/tmp/GMfifo1234')),
    ('-j4 --jobserver-auth=3,4 --jobserver-auth=fifo:/x', ('fifo', '/x')),   # last wins
    ('-j4 -- X=--jobserver-auth=3,4', None),             # after --: assignments
    ('-j4 --jobserver-auth=-2,-2', ('invalid', '-2,-2')),
    ('-j4 --jobserver-auth=junk', ('invalid', 'junk')),
    ('-j4 --jobserver-auth=fifo:', ('invalid', 'fifo:')),
])
def test_parse_makeflags(makeflags, expected):
    assert parse_makeflags(makeflags) == expected


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


def run_commands(client, count, seconds):
    """`count` threads each hold a slot for `seconds`; returns the most at once."""
    lock = threading.Lock()
    state = {'now': 0, 'most': 0}

    def command():
        client.acquire()
        try:
            with lock:
                state['now'] += 1
                state['most'] = max(state['most'], state['now'])
            time.sleep(seconds)
            with lock:
                state['now'] -= 1
        finally:
            client.release()

    threads = [threading.Thread(target=command) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 3)
        assert not t.is_alive(), 'a command never got a slot'
    return state['most']


def test_never_more_than_make_allows(jobserver4):
    client = JobserverClient.from_environ({'MAKEFLAGS': jobserver4.makeflags})
    assert client.usable, client.problem
    most = run_commands(client, 12, 0.05)
    assert most == 4            # the implicit slot + make's 3 tokens, all used
    assert client.max_running == 4
    assert client.tokens_held == 0
    assert jobserver4.tokens() == b'+++'     # every token went back
    client.close()


def test_returns_the_bytes_it_read():
    js = PipeJobserver(1)
    os.write(js.w, b'ab')               # make may use different token bytes
    client = JobserverClient.from_environ({'MAKEFLAGS': js.makeflags})
    for _ in range(3):
        client.acquire()
    assert client.tokens_held == 2
    for _ in range(3):
        client.release()
    assert sorted(js.tokens()) == sorted(b'ab')
    client.close()
    js.close()


def test_private_descriptors_leave_makes_fds_alone():
    js = PipeJobserver(2)
    flags = fcntl.fcntl(js.r, fcntl.F_GETFL)
    client = JobserverClient.from_environ({'MAKEFLAGS': js.makeflags})
    client.acquire()
    client.acquire()                    # reads a token through the private description
    assert fcntl.fcntl(js.r, fcntl.F_GETFL) == flags     # still blocking for make
    assert os.get_inheritable(js.r) and os.get_inheritable(js.w)
    client.keep_from_commands()
    assert not os.get_inheritable(js.r) and not os.get_inheritable(js.w)
    client.release()
    client.release()
    client.close()
    js.close()


def test_freed_implicit_slot_wakes_a_waiter():
    js = PipeJobserver(1)               # -j1: no tokens at all
    client = JobserverClient.from_environ({'MAKEFLAGS': js.makeflags})
    client.acquire()
    got = threading.Event()

    def waiter():
        client.acquire()
        got.set()
        client.release()

    t = threading.Thread(target=waiter)
    t.start()
    assert not got.wait(0.3)            # blocked: the only slot is taken
    client.release()
    assert got.wait(WAIT)
    t.join(WAIT)
    assert js.tokens() == b''           # never took a token that did not exist
    client.close()
    js.close()


def test_interrupt_and_close_release_waiters_and_tokens(tmp_path):
    js = FifoJobserver(str(tmp_path / 'fifo'), 3)
    client = JobserverClient.from_environ({'MAKEFLAGS': js.makeflags})
    for _ in range(3):
        client.acquire()                # implicit + both tokens
    assert client.tokens_held == 2 and js.tokens() == b''
    outcome = []

    def waiter():
        try:
            client.acquire()
            outcome.append('acquired')
        except JobserverInterrupted:
            outcome.append('interrupted')

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    client.interrupt()
    t.join(WAIT)
    assert outcome == ['interrupted']
    with pytest.raises(JobserverInterrupted):
        client.acquire()
    client.close()                      # gives make its tokens back at once
    assert js.tokens() == b'++'
    for _ in range(3):
        client.release()                # the commands end later: nothing more written
    assert js.tokens() == b''
    js.close()


def test_unavailable_pipe_means_one_command_at_a_time():
    r, w = os.pipe()
    os.close(r)
    os.close(w)                         # what make 4.3 does for a non-recursive line
    client = JobserverClient.from_environ({'MAKEFLAGS': '-j4 --jobserver-auth=%d,%d' % (r, w)})
    assert not client.usable
    assert 'unavailable' in client.problem and "'+'" in client.hint
    assert run_commands(client, 4, 0.05) == 1
    client.close()


def test_not_a_pipe_is_refused(tmp_path):
    path = tmp_path / 'plain'
    path.write_text('')
    fd = os.open(path, os.O_RDWR)
    try:
        client = JobserverClient.from_environ(
            {'MAKEFLAGS': '-j4 --jobserver-auth=%d,%d' % (fd, fd)})
        assert not client.usable and 'not a pipe' in client.problem
    finally:
        os.close(fd)
    client = JobserverClient.from_environ(
        {'MAKEFLAGS': '-j4 --jobserver-auth=fifo:%s' % path})
    assert not client.usable and 'not a fifo' in client.problem


def test_no_jobserver_no_client():
    assert JobserverClient.from_environ({'MAKEFLAGS': ' -j4'}) is None
    assert JobserverClient.from_environ({}) is None


def test_interrupt_from_a_signal_handler_inside_the_client():
    """Python may run a signal handler (which calls interrupt()) in the main thread while
    that thread is inside the client with its lock held: that must not deadlock."""
    js = PipeJobserver(2)
    client = JobserverClient.from_environ({'MAKEFLAGS': js.makeflags})
    done = threading.Event()

    def handler_inside_lock():
        with client._lock:      # as if the handler interrupted a method mid-way
            client.interrupt()
        done.set()

    t = threading.Thread(target=handler_inside_lock, daemon=True)
    t.start()
    assert done.wait(WAIT), 'interrupt() deadlocked on the client lock'
    client.close()
    js.close()
