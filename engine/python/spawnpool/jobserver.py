"""make's jobserver for the pool: the engine's client (engine/include/spawnpool/jobserver.h).

A ``make -jN`` passes its jobserver to recipes in MAKEFLAGS (``--jobserver-auth=fifo:PATH``,
``--jobserver-auth=R,W``, ``--jobserver-fds=R,W``).  The pool's scheduler takes a token for
every command beyond the first one running, together with its slot and its memory, and
gives it back when the command ends (docs/architecture.md, "One admission point"); this
module only opens the client, early (the R,W fds may be reused by the process later).
The client: ``usable``, ``problem`` and ``hint`` (why not, what to do), ``claim_warning()``
(True once: whoever says the problem), ``keep_from_commands()``, ``return_all()``,
``max_running``, ``tokens_held``.
"""

import os

__all__ = ['from_environ']


def from_environ(environ=None):
    """The client for the jobserver in ``environ['MAKEFLAGS']`` (default os.environ), or
    None if it names none."""
    makeflags = (os.environ if environ is None else environ).get('MAKEFLAGS') or ''
    if 'jobserver-' not in makeflags:
        return None
    from ._spawnpool import Jobserver
    return Jobserver.from_makeflags(makeflags)
