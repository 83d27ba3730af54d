"""spawnpool: run a build's commands through pre-spawned spawner processes.

A driver that has grown to gigabytes pays for every fork() it makes; the pool's spawners
are small processes started once, so spawning costs the same whatever the driver's size.

    import spawnpool
    with spawnpool.Pool(slots=4) as pool:
        r = pool.run(spawnpool.Command(["cc", "-c", "a.c"], output=spawnpool.CAPTURE))
        if not r.started:
            print(r.failure, r.error_number, r.error_message)   # it never ran
        r.returncode, r.stdout, r.stderr, r.user_time, r.max_rss_kb

Every runner has that one method, ``run(command) -> Result`` (command.py): the pool, the
stock `PopenRunner`, the tests' `spawnpool.testing.FakeRunner`, and the build-feature
layers stacked on any of them (stack.py: the engine's launcher, output sync and direct
exec; trace and statistics), built from one options spec (options.py) that both
``scons --process-spawner`` and ``spawnpool run`` (cli.py) use.

``Pool.run(argv, env=None, cwd=None, capture=False, merge_stderr=False)``, the earlier
form, still works: it raises SpawnError (an OSError, like Popen's) for a command that
never started.

The pure-Python parts import without the compiled module: `spawnpool.Pool` raises
ImportError when that module cannot be loaded (built for another interpreter, say).
"""

import importlib
import os

from .command import (CAPTURE, CAPTURE_MERGED, PASSTHROUGH, Command, Result, SpawnError,
                      SpawnerDied, spawn_error)

__all__ = ["Pool", "Command", "Result", "SpawnError", "SpawnerDied", "spawn_error",
           "PASSTHROUGH", "CAPTURE", "CAPTURE_MERGED", "PopenRunner", "spawner_path",
           "Stats", "TraceWriter"]

# Imported at first use, so that `import spawnpool.options` (the SCons plugin, in every
# build) costs little, and loads no compiled code.
_LAZY = {"Pool": ".pool", "PopenRunner": ".popen_runner", "Stats": ".stats",
         "TraceWriter": ".trace"}


def spawner_path():
    """The spawnpool-spawner executable: $SPAWNPOOL_SPAWNER, else the one beside this file."""
    return os.environ.get("SPAWNPOOL_SPAWNER") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "spawnpool-spawner")


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'spawnpool' has no attribute %r" % (name,))
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
