"""What happens around each command when a build distributes compiles.

`CommandGate.run(pool, argv, env, cwd, runner)` is called per command instead of
``runner.run(pool, argv, env, cwd)`` (or ``pool.run``) and adds, each only when set:

- a compiler launcher (launcher.py): compile lines run as ``<launcher> <line>``, with
  the driver's HOME/DISTCC_*/CCACHE_* added to their environment;
- local slots: at most N commands that run on this machine at once.  What runs where is
  only known afterwards (distcc decides per compile, and may fall back to compiling
  locally), so the gate approximates: compiles that go through the launcher count as
  remote, every other command as local;
- a make jobserver (jobserver.py): a token for every command beyond the first one
  running, given back when it ends.

The order is local slot, then jobserver token: a command never holds one of make's
tokens while it waits for a local slot.  Both are released in ``finally`` blocks.  After
`interrupt()`, commands waiting for either do not start: they return ``-signum`` (as if
the signal had killed them; the driver reports the interruption).

Python runs signal handlers in the main thread, later than the signal: Ctrl-C kills the
running commands, their slots free up, and a waiting command could start before the
driver's handler has run.  `watch_signals(fd)` closes that window: right before a
command starts, the gate looks for SIGINT, SIGTERM or SIGHUP (1) still pending for the
process (sigpending() with them blocked for a moment in this thread: a process-wide
signal stays pending until the thread it went to takes it), then (2) on `fd`, the read
end of ``signal.set_wakeup_fd()``, where the interpreter's C-level handler writes each
signal's number the moment that thread takes it.

Thread-safe: run() is called from every job thread; counters are under one lock.
`interrupt()` may be called from a signal handler: it takes only re-entrant locks, which
no thread holds while it blocks.
"""

import os
import signal
import threading

from .jobserver import JobserverInterrupted
from .output_sync import OutputSync, console_message

__all__ = ['CommandGate', 'LocalSlots', 'GateInterrupted']

_MAX_SHOWN = 200        # characters of a command line in a message
_STOP_SIGNALS = frozenset((signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
_sigmask = signal.pthread_sigmask


class GateInterrupted(Exception):
    """A wait for a slot ended because the build was interrupted."""


class LocalSlots:
    """A counting semaphore that `interrupt()` breaks; remembers the most holders seen."""

    def __init__(self, limit):
        if limit < 1:
            raise ValueError('local slots must be at least 1, not %r' % (limit,))
        self.limit = limit
        self.max_seen = 0
        self._held = 0
        self._stopped = False
        # Re-entrant: interrupt() runs in signal handlers (see JobserverClient).
        self._cond = threading.Condition(threading.RLock())

    def acquire(self):
        with self._cond:
            while self._held >= self.limit and not self._stopped:
                self._cond.wait()
            if self._stopped:
                raise GateInterrupted()
            self._held += 1
            if self._held > self.max_seen:
                self.max_seen = self._held

    def release(self):
        with self._cond:
            self._held -= 1
            self._cond.notify()

    def interrupt(self):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


class CommandGate:
    """Launcher, local slots and jobserver around each command (see the module comment).

    `launcher`: a launcher.Launcher or None; `local_slots`: a LocalSlots or None;
    `jobserver`: a jobserver.JobserverClient or None; `prefix` starts every message.
    """

    def __init__(self, launcher=None, local_slots=None, jobserver=None, prefix='spawnpool'):
        self.launcher = launcher
        self.local_slots = local_slots
        self.jobserver = jobserver
        self.prefix = prefix
        self._sync = OutputSync() if launcher is not None and launcher.is_distcc else None
        self._lock = threading.Lock()
        self._interrupt_signal = 0  # the signal that interrupted the build, or 0
        self._signal_fd = None      # see watch_signals()
        self._signal_lock = threading.Lock()
        self.launched = 0           # compiles run through the launcher
        self.ran_locally = 0        # ... of which distcc said it compiled locally
        self.launcher_failed = 0    # ... of which the launcher itself failed
        self.local_commands = 0     # commands counted as local (not launched)

    def run(self, pool, argv, env, cwd, runner=None):
        """Run one command; returns its status as runner.run() (or Pool.run) gives it."""
        launcher = self.launcher
        line = argv[2] if len(argv) == 3 and argv[1] == '-c' else None
        wrapped = launcher.wrap(line) if launcher is not None and line is not None else None
        slots = self.local_slots if wrapped is None else None
        jobserver = self.jobserver
        try:
            if slots is not None:
                slots.acquire()
            try:
                if jobserver is not None:
                    jobserver.acquire()
                try:
                    if self._interrupt_signal or self._signal_fd is not None and (
                            self._signalled()):
                        raise GateInterrupted()
                    if wrapped is None:
                        with self._lock:
                            self.local_commands += 1
                        if runner is not None:
                            return runner.run(pool, argv, env, cwd)
                        return pool.run(argv, env=env, cwd=cwd).returncode
                    return self._launch(pool, argv, line, wrapped, env, cwd, runner)
                finally:
                    if jobserver is not None:
                        jobserver.release()
            finally:
                if slots is not None:
                    slots.release()
        except (GateInterrupted, JobserverInterrupted):
            return -(self._interrupt_signal or signal.SIGINT)

    def _launch(self, pool, argv, line, wrapped, env, cwd, runner):
        launcher = self.launcher
        argv = [argv[0], '-c', wrapped]
        env = launcher.environment(env if env is not None else os.environ)
        target = _Capture(pool, self._sync, launcher) if self._sync is not None else pool
        if runner is not None:
            status = runner.run(target, argv, env, cwd)
        else:
            status = target.run(argv, env=env, cwd=cwd).returncode
        problem = launcher.failure(status)
        with self._lock:
            self.launched += 1
            if target is not pool and target.ran_locally:
                self.ran_locally += 1
            if problem:
                self.launcher_failed += 1
        if problem:
            shown = line if len(line) <= _MAX_SHOWN else line[:_MAX_SHOWN - 3] + '...'
            console_message('%s: %s for: %s\n' % (self.prefix, problem, shown))
        return status

    def watch_signals(self, fd):
        """Check the non-blocking wake-up fd `fd` for SIGINT/SIGTERM/SIGHUP before each
        command starts (see the module comment).  Bytes for other signals are dropped."""
        self._signal_fd = fd

    def _signalled(self):
        with self._signal_lock:     # one reader at a time: none misses another's byte
            if self._interrupt_signal:
                return True
            old = _sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                pending = _STOP_SIGNALS.intersection(signal.sigpending())
            finally:
                _sigmask(signal.SIG_SETMASK, old)   # commands forked here need it clear
            if pending:
                self.interrupt(min(pending))
                return True
            try:
                data = os.read(self._signal_fd, 256)
            except OSError:         # BlockingIOError: nothing arrived
                return False
            for signum in data:
                if signum in _STOP_SIGNALS:
                    self.interrupt(signum)
                    return True
            return False

    def interrupt(self, signum=signal.SIGINT):
        """Commands waiting for a slot or token return -signum instead of starting."""
        self._interrupt_signal = signum
        if self.local_slots is not None:
            self.local_slots.interrupt()
        if self.jobserver is not None:
            self.jobserver.interrupt()

    def close(self):
        """At the end of the build: give make back every token still held."""
        if self.jobserver is not None:
            self.jobserver.close()

    def summary(self):
        """What the launcher and the slots did, as lines of text (empty if nothing)."""
        lines = []
        launcher = self.launcher
        if launcher is not None:
            text = '%s: %s: %d compiles through %s' % (
                self.prefix, launcher.name, self.launched, launcher.name)
            if launcher.is_distcc:
                text += (', %d of them compiled locally by distcc (fallback)'
                         % self.ran_locally)
            text += ', %d failed in %s; %d other commands ran locally' % (
                self.launcher_failed, launcher.name, self.local_commands)
            lines.append(text)
        if self.local_slots is not None:
            lines.append('%s: local slots: at most %d local commands at once (limit %d)'
                         % (self.prefix, self.local_slots.max_seen, self.local_slots.limit))
        return lines


class _Capture:
    """A pool stand-in for one distcc compile: captures its output to look for distcc's
    "compiled locally" warnings and prints it as one block, unless the caller captures
    (synchronized output) and prints it itself."""

    __slots__ = ('pool', 'sync', 'launcher', 'ran_locally')

    def __init__(self, pool, sync, launcher):
        self.pool = pool
        self.sync = sync
        self.launcher = launcher
        self.ran_locally = False

    def run(self, argv, env=None, cwd=None, capture=False, merge_stderr=False):
        if capture:
            r = self.pool.run(argv, env=env, cwd=cwd, capture=True,
                              merge_stderr=merge_stderr)
        else:
            r = self.pool.run(argv, env=env, cwd=cwd, **self.sync.run_options())
            self.sync.emit(r.stdout, r.stderr)
        if self.launcher.ran_locally(r.stderr) or self.launcher.ran_locally(r.stdout):
            self.ran_locally = True
        return r
