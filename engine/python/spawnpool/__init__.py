"""spawnpool: run a build's commands through pre-spawned spawner processes.

A driver that has grown to gigabytes pays for every fork() it makes; the pool's spawners
are small processes started once, so spawning costs the same whatever the driver's size.

    import spawnpool
    with spawnpool.Pool(slots=4) as pool:
        r = pool.run(["cc", "-c", "a.c"], capture=True)
        r.returncode, r.stdout, r.stderr, r.user_time, r.max_rss_kb

``run`` is thread-safe and releases the GIL while the command runs; more threads than
slots queue for a free slot. A command that cannot start raises SpawnError (an OSError
with ``errno``, ``filename`` and ``stage``); one whose spawner dies under it raises
SpawnerDied. A command that runs and fails is data: see ``returncode``.

Build-driver features on top, one module each: ``shell.split_simple_command`` (a command
line that needs no shell), ``ShellRunner`` (runs ``sh -c`` lines with direct exec,
synchronized output, a trace and statistics), ``TraceWriter``, ``Stats``, ``OutputSync``.
``python3 -m spawnpool run`` runs one command per line of a file (see cli.py).
"""

import os

from ._spawnpool import Result, SpawnError, SpawnerDied
from ._spawnpool import Pool as _Pool
from .output_sync import OutputSync
from .runner import ShellRunner
from .stats import Stats
from .trace import TraceWriter

__all__ = ["Pool", "Result", "SpawnError", "SpawnerDied", "spawner_path",
           "OutputSync", "ShellRunner", "Stats", "TraceWriter"]


def spawner_path():
    """The spawnpool-spawner executable: $SPAWNPOOL_SPAWNER, else the one beside this file."""
    return os.environ.get("SPAWNPOOL_SPAWNER") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "spawnpool-spawner")


class Pool(_Pool):
    """A pool of ``slots`` spawner processes (default: one per CPU).

    run(argv, env=None, cwd=None, capture=False, merge_stderr=False) -> Result
        env: a mapping for the complete environment (None: this process's environment);
        cwd: None for this process's current directory. Without capture the command
        writes to this process's stdout/stderr as they were when the pool started.
    cancel(sig=SIGTERM): signal the process group of every running command.
    close(): end the spawners; running commands are killed. Also on ``with`` exit.

    same_cpu_handoff: wake each spawner on the submitting thread's CPU, and the thread
    waiting for the reply on the spawner's (see docs/architecture.md, "The CPU hint");
    False leaves placement to the scheduler.
    """

    def __init__(self, slots=None, spawner=None, output_chunk_bytes=1 << 20,
                 same_cpu_handoff=True):
        super().__init__(slots or os.cpu_count() or 1, spawner or spawner_path(),
                         output_chunk_bytes, same_cpu_handoff)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False
