"""The gate: what happens around each command when a build distributes compiles.

`Gate` is a layer (stack.py): ``run(command) -> Result`` on its `inner` runner, adding,
each only when set:

- a compiler launcher (launcher.py): compile lines run as ``<launcher> <line>``, with
  the driver's HOME/DISTCC_*/CCACHE_* added to their environment; a distcc compile's
  output is captured (and printed as one block, unless the caller captures) to spot
  distcc's "compiled locally" warnings;
- local slots: at most N commands that run on this machine at once.  What runs where is
  only known afterwards (distcc decides per compile, and may fall back to compiling
  locally), so the gate approximates: compiles that go through the launcher count as
  remote, every other command as local;
- a make jobserver (jobserver.py): a token for every command beyond the first one
  running, given back when it ends.

The order is local slot, then jobserver token: a command never holds one of make's
tokens while it waits for a local slot.  Both are released in ``finally`` blocks.  After
`interrupt()`, or when the interrupts.SignalWatch says a stop signal arrived, commands
waiting for either do not start: they return a Result with returncode -signum (as if the
signal had killed them; the driver reports the interruption).

Thread-safe: run() is called from every job thread; counters are under one lock.
`interrupt()` may be called from a signal handler: it takes only re-entrant locks, which
no thread holds while it blocks.
"""

import signal
import threading

from .command import PASSTHROUGH, Command, Result
from .jobserver import JobserverInterrupted
from .output_sync import OutputSync, console_message

__all__ = ['Gate', 'LocalSlots', 'GateInterrupted']

_MAX_SHOWN = 200        # characters of a command line in a message


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


class Gate:
    """Launcher, local slots and jobserver around each command (see the module comment).

    `inner`: the runner below (stack.py sets it); `launcher`: a launcher.Launcher or
    None; `local_slots`: a LocalSlots or None; `jobserver`: a jobserver.JobserverClient
    or None; `watch`: an interrupts.SignalWatch or None; `prefix` starts every message.
    """

    def __init__(self, inner, launcher=None, local_slots=None, jobserver=None, watch=None,
                 prefix='spawnpool'):
        self.inner = inner
        self.launcher = launcher
        self.local_slots = local_slots
        self.jobserver = jobserver
        self.watch = watch
        self.prefix = prefix
        self._sync = OutputSync() if launcher is not None and launcher.is_distcc else None
        self._lock = threading.Lock()
        self._interrupt_signal = 0  # the signal that interrupted the build, or 0
        self.launched = 0           # compiles run through the launcher
        self.ran_locally = 0        # ... of which distcc said it compiled locally
        self.launcher_failed = 0    # ... of which the launcher itself failed
        self.local_commands = 0     # commands counted as local (not launched)

    def run(self, command):
        launcher = self.launcher
        argv = command.argv
        wrapped = None
        if launcher is not None and len(argv) == 3 and argv[1] == '-c':
            wrapped = launcher.wrap(argv[2])
        slots = self.local_slots if wrapped is None else None
        jobserver = self.jobserver
        try:
            if slots is not None:
                slots.acquire()
            try:
                if jobserver is not None:
                    jobserver.acquire()
                try:
                    self._check_interrupted()
                    if wrapped is None:
                        with self._lock:
                            self.local_commands += 1
                        return self.inner.run(command)
                    return self._launch(command, wrapped)
                finally:
                    if jobserver is not None:
                        jobserver.release()
            finally:
                if slots is not None:
                    slots.release()
        except (GateInterrupted, JobserverInterrupted):
            return Result(returncode=-(self._interrupt_signal or signal.SIGINT))

    def _check_interrupted(self):
        if self._interrupt_signal:
            raise GateInterrupted()
        signum = self.watch.signalled() if self.watch is not None else 0
        if signum:
            self.interrupt(signum)
            raise GateInterrupted()

    def _launch(self, command, wrapped):
        launcher = self.launcher
        argv = [command.argv[0], '-c', wrapped]
        env = launcher.environment(command.environment)
        sync = self._sync
        if sync is not None and command.output == PASSTHROUGH:
            result = self.inner.run(Command(argv, env, command.cwd, sync.capture_mode))
            sync.emit(result.stdout, result.stderr)
        else:
            result = self.inner.run(Command(argv, env, command.cwd, command.output))
        problem = launcher.failure(result.returncode) if result.started else None
        with self._lock:
            self.launched += 1
            if sync is not None and (launcher.ran_locally(result.stderr)
                                     or launcher.ran_locally(result.stdout)):
                self.ran_locally += 1
            if problem:
                self.launcher_failed += 1
        if problem:
            line = command.argv[2]
            shown = line if len(line) <= _MAX_SHOWN else line[:_MAX_SHOWN - 3] + '...'
            console_message('%s: %s for: %s\n' % (self.prefix, problem, shown))
        return result

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

