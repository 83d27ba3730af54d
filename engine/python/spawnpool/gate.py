"""The gate: the compiler launcher around each command, alone on a runner: the engine's
launcher layer (engine/src/command/launcher_layer.h, which says what it does), for Python
callers.  A build's session stacks it itself (stack.py).

A compile runs through the launcher and is not local (``Command.local`` False: the pool's
local slots bound only the other commands); a distcc compile the caller lets print is
captured to spot distcc's "compiled locally" warnings and printed as one block; a
launcher's own failure is named in a message.  Admission is the pool's scheduler's.

Thread-safe: run() is called from every job thread.
"""

from .pool import _spawnpool

__all__ = ['Gate']


class Gate:
    """`inner`: the runner below; `launcher`: a launcher.Launcher; `prefix` starts every
    message.  `launched`, `ran_locally`, `launcher_failed`, `local_commands`: the counts
    so far; summary(): what the launcher did, as lines of text."""

    def __init__(self, inner, launcher, prefix='spawnpool'):
        self.inner = inner
        self.launcher = launcher
        self._stack = _spawnpool.Session(inner, launcher, direct_exec=False, prefix=prefix)
        self.run = self._stack.run

    launched = property(lambda self: self._stack.counts[0])
    ran_locally = property(lambda self: self._stack.counts[1])
    launcher_failed = property(lambda self: self._stack.counts[2])
    local_commands = property(lambda self: self._stack.counts[3])

    def summary(self):
        return [self._stack.summary]
