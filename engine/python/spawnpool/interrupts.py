"""The one signal hook of the package: what an interrupt does to a build's commands.

A front end (the SCons plugin, ``spawnpool run``) hands each of SIGINT, SIGTERM and
SIGHUP to `chain()`, with its own handler (SCons': stop the taskmaster; the CLI's: leave
the wait) and the session's ``interrupt(signum)`` (stack.py): the pool's commands waiting
to start (for a slot, a local slot, memory or a jobserver token) then return -N instead
of starting (Pool.interrupt), and a signal sent to the driver alone (not SIGINT, which a
terminal sends to the whole process group, the spawners included) is passed on to the
running commands, which run in process groups of their own.

Python runs signal handlers in the main thread, later than the signal: Ctrl-C kills the
running commands, their slots free up, and a waiting command could start before the
handler has run.  `SignalWatch` closes that window: it has the interpreter's C-level
handler write each signal's number to a pipe (``signal.set_wakeup_fd()``) the moment it
takes it, and the pool is given the pipe's read end (``Pool(stop_signal_fd=)``,
PoolOptions::stop_signal_fd, read in engine/src/pool/stop_signal.cc): right before a
command starts, the pool looks there and at the stop signals still pending for the
process, and a stop signal starts nothing more.  So start() the watch before the pool is
made.

Threading: chain()'s handlers run in the main thread; the pool reads the pipe from any
thread.
"""

import os
import signal

__all__ = ['STOP_SIGNALS', 'chain', 'SignalWatch']

#: The signals that stop a build (SCons' and make's set).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
    """The pipe the interpreter writes each signal's number to; `fd`, its read end, is
    the pool's stop_signal_fd (see the module comment)."""

    def __init__(self):
        self.fd = None              # read end of the wake-up pipe; None: not watching

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

    def drain(self):
        """Drop the signal numbers written so far: a new build starts after an
        interrupted one (SCons' --interactive), and its pool must not take the last
        build's Ctrl-C for its own."""
        if self.fd is None:
            return
        try:
            while os.read(self.fd, 256):
                pass
        except BlockingIOError:
            pass
