"""The gate: the compiler launcher around each command, when a build distributes compiles.

`Gate` is a layer (stack.py): ``run(command) -> Result`` on its `inner` runner.  A compile
line runs as ``<launcher> <line>`` (launcher.py), with the driver's HOME/DISTCC_*/CCACHE_*
added to its environment, and is submitted as not local (``Command.local`` False): the
pool's local slots bound only the other commands.  What runs where is only known
afterwards (distcc decides per compile, and may fall back to compiling locally), so this
approximates: compiles through the launcher count as remote, every other command as
local.  A distcc compile's output is captured (and printed as one block, unless the
caller captures) to spot distcc's "compiled locally" warnings.

Admission (slots, local slots, make's jobserver tokens, memory) is the pool's scheduler's
alone: a command gets all of them at once, at dispatch, and after an interrupt waiting
commands come back with returncode -N (Pool.interrupt; docs/architecture.md, "One
admission point").

Thread-safe: run() is called from every job thread; counters are under one lock.
"""

import threading

from .command import PASSTHROUGH, Command
from .output_sync import OutputSync, console_message

__all__ = ['Gate']

_MAX_SHOWN = 200        # characters of a command line in a message


class Gate:
    """The launcher around each command (see the module comment).

    `inner`: the runner below (stack.py sets it); `launcher`: a launcher.Launcher;
    `prefix` starts every message.
    """

    def __init__(self, inner, launcher, prefix='spawnpool'):
        self.inner = inner
        self.launcher = launcher
        self.prefix = prefix
        self._sync = OutputSync() if launcher.is_distcc else None
        self._lock = threading.Lock()
        self.launched = 0           # compiles run through the launcher
        self.ran_locally = 0        # ... of which distcc said it compiled locally
        self.launcher_failed = 0    # ... of which the launcher itself failed
        self.local_commands = 0     # commands counted as local (not launched)

    def run(self, command):
        argv = command.argv
        wrapped = None
        if len(argv) == 3 and argv[1] == '-c':
            wrapped = self.launcher.wrap(argv[2])
        if wrapped is None:
            with self._lock:
                self.local_commands += 1
            return self.inner.run(command)
        return self._launch(command, wrapped)

    def _launch(self, command, wrapped):
        launcher = self.launcher
        argv = [command.argv[0], '-c', wrapped]
        env = launcher.environment(command.environment)
        sync = self._sync
        if sync is not None and command.output == PASSTHROUGH:
            result = self.inner.run(Command(argv, env, command.cwd, sync.capture_mode, False))
            sync.emit(result.stdout, result.stderr)
        else:
            result = self.inner.run(Command(argv, env, command.cwd, command.output, False))
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

    def summary(self):
        """What the launcher did, as lines of text."""
        launcher = self.launcher
        text = '%s: %s: %d compiles through %s' % (
            self.prefix, launcher.name, self.launched, launcher.name)
        if launcher.is_distcc:
            text += ', %d of them compiled locally by distcc (fallback)' % self.ran_locally
        text += ', %d failed in %s; %d other commands ran locally' % (
            self.launcher_failed, launcher.name, self.local_commands)
        return [text]
