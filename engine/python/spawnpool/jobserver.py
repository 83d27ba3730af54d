"""GNU make jobserver client: run a driver's commands inside make's job slots.

A ``make -jN`` passes its jobserver to recipes in ``MAKEFLAGS``:

    --jobserver-auth=fifo:PATH   make 4.4 (a named pipe; any process may open it)
    --jobserver-auth=R,W         make 4.2, 4.3 (an anonymous pipe: fds R and W)
    --jobserver-fds=R,W          make 3.78 - 4.1 (the same, older name)

The pipe holds N-1 one-byte tokens.  Each process that runs jobs owns one implicit slot:
its first running command needs no token; each further command reads a token first and
writes the same byte back when it ends.  So ``make -j4`` around ``scons -j8`` never has
more than 4 commands running in all.

make 4.3 passes the R,W descriptors only to recipe lines it considers recursive: lines
that contain ``$(MAKE)`` or start with ``+``.  Elsewhere MAKEFLAGS names them but they are
closed (or are other files).  As a sub-make does then ("jobserver unavailable: using
-j1"), the client then runs one command at a time and says why (`problem`).

Threading: `acquire()` and `release()` are called from many threads; `interrupt()` also
from signal handlers.  A waiting
`acquire()` blocks in poll() with the GIL released, on the token pipe and a private wake
pipe, so it also returns when the implicit slot frees up or on `interrupt()`/`close()`
(then it raises `JobserverInterrupted`).  Reads use a private non-blocking open file
description of the pipe (``/proc/self/fd/R`` or the fifo opened anew), so make's own
descriptor keeps its flags and a token taken by someone else between poll() and read()
never blocks us.  Every descriptor this module opens is close-on-exec;
`keep_from_commands()` makes the inherited R,W close-on-exec too.
"""

import fcntl
import os
import select
import stat
import threading

__all__ = ['JobserverClient', 'JobserverInterrupted', 'parse_makeflags']


class JobserverInterrupted(Exception):
    """acquire() gave up: the client was interrupted or closed."""


def parse_makeflags(makeflags):
    """``('fifo', path)``, ``('pipe', r, w)`` or None for the jobserver named in MAKEFLAGS.

    As make does, the last jobserver option wins; words after ``--`` are variable
    assignments, not options.  A malformed option gives ``('invalid', text)``.
    """
    found = None
    for word in (makeflags or '').split():
        if word == '--':
            break
        for prefix in ('--jobserver-auth=', '--jobserver-fds='):
            if word.startswith(prefix):
                found = word[len(prefix):]
    if found is None:
        return None
    if found.startswith('fifo:'):
        path = found[5:]
        return ('fifo', path) if path else ('invalid', found)
    r, sep, w = found.partition(',')
    try:
        r, w = int(r), int(w)
    except ValueError:
        return ('invalid', found)
    if not sep or r < 0 or w < 0:      # make 4.2 writes -2,-2 for "no jobserver"
        return ('invalid', found)
    return ('pipe', r, w)


def _private_pipe_fds(r, w):
    """Private (read, write) descriptors of the inherited pipe R,W, or raise OSError."""
    for fd, want in ((r, os.O_RDONLY), (w, os.O_WRONLY)):
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode):
            raise OSError(0, 'fd %d is not a pipe' % fd)
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        if mode not in (want, os.O_RDWR):
            raise OSError(0, 'fd %d is not open for %s' % (
                fd, 'reading' if want == os.O_RDONLY else 'writing'))
    if os.fstat(r).st_ino != os.fstat(w).st_ino:
        raise OSError(0, 'fds %d and %d are not the same pipe' % (r, w))
    rfd = os.open('/proc/self/fd/%d' % r, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        wfd = os.open('/proc/self/fd/%d' % w, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        os.close(rfd)
        raise
    return rfd, wfd


def _private_fifo_fds(path):
    st = os.stat(path)
    if not stat.S_ISFIFO(st.st_mode):
        raise OSError(0, '%s is not a fifo' % path)
    rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        wfd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)   # a reader exists: rfd
    except OSError:
        os.close(rfd)
        raise
    return rfd, wfd


class JobserverClient:
    """One process's share of a make jobserver (see the module comment).

    Use ``acquire()`` before starting a command and ``release()`` (in a finally) after it
    ended.  `usable` is False when MAKEFLAGS names a jobserver that cannot be opened:
    then only the implicit slot exists (one command at a time) and `problem` says why.
    """

    def __init__(self, auth):
        """`auth` as parse_makeflags() returns it (not None)."""
        self.auth = auth
        self.problem = None         # why the jobserver cannot be used, or None
        self.hint = None            # what to do about it, or None
        self._rfd = self._wfd = None
        try:
            if auth[0] == 'pipe':
                self._rfd, self._wfd = _private_pipe_fds(auth[1], auth[2])
            elif auth[0] == 'fifo':
                self._rfd, self._wfd = _private_fifo_fds(auth[1])
            else:
                self.problem = 'cannot parse the jobserver option %r in MAKEFLAGS' % (
                    auth[1],)
        except OSError as e:
            where = ('fifo %s' % auth[1] if auth[0] == 'fifo'
                     else 'fds %d,%d' % (auth[1], auth[2]))
            self.problem = "make's jobserver (%s in MAKEFLAGS) is unavailable: %s" % (
                where, e.strerror or e)
            if auth[0] == 'pipe':
                self.hint = ("make passes its jobserver only to recursive recipe lines: "
                             "start the line with '+' or use $(MAKE) in it")
        self._wake_r, self._wake_w = os.pipe()      # non-inheritable
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        # Re-entrant: interrupt() runs in signal handlers, which Python may run in the
        # main thread while that thread is inside a method holding the lock.
        self._lock = threading.RLock()
        self._implicit_free = True
        self._tokens = []           # bytes read from make, returned last-in first-out
        self._waiters = 0
        self._stopped = False       # interrupt() or close(): acquire() raises
        self._closed = False
        self.max_running = 0        # most commands this client let run at once
        self._running = 0

    @classmethod
    def from_environ(cls, environ=None):
        """A client for the jobserver in ``environ['MAKEFLAGS']``; None if it names none."""
        environ = os.environ if environ is None else environ
        auth = parse_makeflags(environ.get('MAKEFLAGS'))
        return cls(auth) if auth is not None else None

    @property
    def usable(self):
        return self._rfd is not None

    @property
    def tokens_held(self):
        """Tokens read from make and not yet given back."""
        return len(self._tokens)

    def keep_from_commands(self):
        """Make the inherited pipe fds R,W close-on-exec: the commands this process
        starts get no job slots of their own from make (the pool's spawners close every
        fd >= 3 anyway; this covers fork+exec elsewhere in the process)."""
        if self.auth[0] == 'pipe' and self.usable:
            for fd in self.auth[1:]:
                try:
                    os.set_inheritable(fd, False)
                except OSError:
                    pass

    def acquire(self):
        """Wait for a job slot (the implicit one, else a token from make)."""
        with self._lock:
            if self._stopped:
                raise JobserverInterrupted()
            if self._implicit_free:
                self._take_implicit_locked()
                return
            self._waiters += 1
        try:
            self._wait()
        finally:
            with self._lock:
                self._waiters -= 1

    def _wait(self):
        # Loop: poll the token pipe and the wake pipe; on each wake-up, the implicit slot
        # first (it costs make nothing), then try to read one token.
        rfd = self._rfd
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        if rfd is not None:
            poller.register(rfd, select.POLLIN)
        while True:
            poller.poll()
            with self._lock:
                # Look first, and leave the wake-up of a stop in the pipe: another waiter
                # woken by it may not have looked yet, and a drained pipe would put it
                # back to sleep for good. (interrupt() sets _stopped and writes under this
                # lock, so nothing comes between the look and the drain.)
                if self._stopped:
                    raise JobserverInterrupted()
                self._drain_wake_locked()
                if self._implicit_free:
                    self._take_implicit_locked()
                    return
            if rfd is None:
                continue
            try:
                token = os.read(rfd, 1)
            except BlockingIOError:
                continue            # another process got it first
            if not token:
                # EOF cannot happen while we hold a write end ourselves; should it
                # anyway, stop polling a pipe that would wake us forever.
                poller.unregister(rfd)
                rfd = None
                continue
            with self._lock:
                if self._stopped or self._implicit_free:
                    self._write_token(token)
                    if self._stopped:
                        raise JobserverInterrupted()
                    self._take_implicit_locked()
                    return
                self._tokens.append(token)
                self._count_locked()
                return

    def release(self):
        """Give back one slot: a token if we hold any, else the implicit slot."""
        with self._lock:
            self._running -= 1
            if self._tokens:
                self._write_token(self._tokens.pop())
                return
            self._implicit_free = True
            if self._waiters:
                self._wake_locked()

    def interrupt(self):
        """Make waiting and later acquire() calls raise JobserverInterrupted."""
        with self._lock:
            self._stopped = True
            self._wake_locked()     # never drained once stopped: wakes every waiter

    def close(self):
        """Interrupt, give every held token back to make, close our descriptors.

        Commands still running when close() is called give nothing back when they end
        (their tokens are returned here already).  Descriptors a waiting thread may be
        polling stay open until the process exits."""
        with self._lock:
            self._stopped = True
            self._wake_locked()
            while self._tokens:
                self._write_token(self._tokens.pop())
            if self._closed or self._waiters:
                return
            self._closed = True
            for name in ('_rfd', '_wfd'):
                fd = getattr(self, name)
                if fd is not None:
                    setattr(self, name, None)
                    os.close(fd)

    # --- helpers; `_lock` held ------------------------------------------------------------

    def _take_implicit_locked(self):
        self._implicit_free = False
        self._count_locked()

    def _count_locked(self):
        self._running += 1
        if self._running > self.max_running:
            self.max_running = self._running

    def _write_token(self, token):
        if self._wfd is None:
            return
        while True:
            try:
                os.write(self._wfd, token)
                return
            except BlockingIOError:     # cannot happen (<= N-1 tokens in a pipe)
                select.select([], [self._wfd], [])
            except OSError:
                return                  # make is gone; nobody needs the token

    def _wake_locked(self):
        try:
            os.write(self._wake_w, b'.')
        except BlockingIOError:
            pass                        # already full of wake-ups

    def _drain_wake_locked(self):
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass
