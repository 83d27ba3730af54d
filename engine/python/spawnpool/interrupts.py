"""The one signal hook of the package: what an interrupt does to a build's commands.

A front end (the SCons plugin, ``spawnpool run``) hands each of SIGINT, SIGTERM and
SIGHUP to `chain()`, with its own handler (SCons': stop the taskmaster; the CLI's: leave
the wait) and the session's ``interrupt(signum)`` (stack.py): commands waiting for a
local slot or a jobserver token then return -N instead of starting, and a signal sent to
the driver alone (not SIGINT, which a terminal sends to the whole process group, the
spawners included) is passed on to the running commands, which run in process groups of
their own.

Python runs signal handlers in the main thread, later than the signal: Ctrl-C kills the
running commands, their slots free up, and a waiting command could start before the
handler has run.  `SignalWatch` closes that window: right before a command starts, the
gate asks it whether SIGINT, SIGTERM or SIGHUP is (1) still pending for the process
(sigpending() with them blocked for a moment in the asking thread: a process-wide signal
stays pending until the thread it went to takes it), or (2) already taken: the
interpreter's C-level handler writes each signal's number to ``signal.set_wakeup_fd()``
the moment it takes it.

Threading: chain()'s handlers run in the main thread; SignalWatch.signalled() is called
from any thread (one at a time, under its lock).
"""

import os
import signal
import threading

__all__ = ['STOP_SIGNALS', 'chain', 'SignalWatch']

#: The signals that stop a build (SCons' and make's set).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_STOP = frozenset(STOP_SIGNALS)
_sigmask = signal.pthread_sigmask


def chain(handler, on_interrupt):
    """A signal handler that calls on_interrupt(signum), then `handler` (a callable, or
    SIG_DFL/SIG_IGN/None: nothing more)."""
    def interrupted(signum, frame):
        try:
            on_interrupt(signum)
        finally:
            if callable(handler):
                handler(signum, frame)
    interrupted.__wrapped__ = handler
    return interrupted


class SignalWatch:
    """Tells whether the build was interrupted, before Python has run the handler."""

    def __init__(self):
        self.fd = None              # read end of the wake-up pipe; None: not watching
        self._lock = threading.Lock()

    def start(self):
        """Have the interpreter write signal numbers to a pipe (main thread only; left
        alone if something else in the process uses set_wakeup_fd).  Idempotent."""
        if self.fd is not None:
            return
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            old = None
        if old != -1:
            if old is not None:
                signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            return
        self.fd = r

    def signalled(self):
        """The stop signal that arrived (see the module comment), or 0 (also before
        start(), or when start() could not take the wake-up fd)."""
        if self.fd is None:
            return 0
        with self._lock:        # one reader at a time: none misses another's byte
            old = _sigmask(signal.SIG_BLOCK, _STOP)
            try:
                pending = _STOP.intersection(signal.sigpending())
            finally:
                _sigmask(signal.SIG_SETMASK, old)   # commands started here need it clear
            if pending:
                return min(pending)
            try:
                data = os.read(self.fd, 256)
            except OSError:         # BlockingIOError: nothing arrived
                return 0
            for signum in data:     # bytes for other signals are dropped
                if signum in _STOP:
                    return signum
            return 0
