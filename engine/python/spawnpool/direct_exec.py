"""Running ``sh -c LINE`` as the program it names, with what the shell would add: the
engine's direct exec layer (engine/src/command/direct_exec.h, which says what it does
and why), for Python callers.

`DirectExec(inner)` is that layer alone on a runner `inner` (the pool, or any object with
``run(command) -> Result``); a build's session stacks it itself (stack.py).
`direct_argv(argv)` is the program's argv when ``argv`` is ``[sh, '-c', line]`` with a
simple line (else None); `sh_status(returncode)` is (the status sh would have returned,
the message it would have printed as bytes, or None).

Thread-safe: run() is called from many threads at once.
"""

from .pool import _spawnpool

__all__ = ['DirectExec', 'direct_argv', 'sh_status']

direct_argv = _spawnpool.direct_argv
sh_status = _spawnpool.sh_status


class DirectExec:
    """The layer on `inner`: ``run(command) -> Result``."""

    def __init__(self, inner):
        self.inner = inner
        self.run = _spawnpool.Session(inner).run
