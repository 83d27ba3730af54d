"""The pool as a runner: `Pool.run(command) -> Result`, in the compiled module.

Threading: run() may be called from any number of threads; it releases the GIL while the
command runs, and more callers than slots queue for a free slot.  On the main thread it
runs Python's signal handlers while it waits; one that raises (KeyboardInterrupt) sends
SIGINT to the command and re-raises once the command has ended.
"""

import os
import sys

try:
    from . import _spawnpool
except ImportError as _error:
    raise ImportError('spawnpool\'s compiled module does not load under Python %d.%d (%s); '
                      'build or install it for this interpreter (scripts/install-scons-plugin '
                      '--python %s)' % (sys.version_info[:2] + (_error, sys.executable)),
                      name='spawnpool._spawnpool') from _error
from .command import CAPTURE, CAPTURE_MERGED, PASSTHROUGH, Command, Result, spawn_error
from .output_sync import console_message, output_block

__all__ = ['Pool']

# The types the engine makes and reads, and the console its layers print to.
_spawnpool._bind(Result, Command, console_message, output_block)
_run = _spawnpool.Pool.run


class Pool(_spawnpool.Pool):
    """A pool of ``slots`` spawner processes (default: one per CPU).

    run(command) -> Result
        The runner interface (see command.py).  Without capture the command writes to
        this process's stdout/stderr as they were when the pool started; stdin is
        /dev/null; it runs in a process group of its own.
    run(argv, env=None, cwd=None, capture=False, merge_stderr=False) -> Result
        The Popen-style form: the same, but a command that never started raises
        SpawnError (SpawnerDied if its spawner died under it).
    cancel(sig=SIGTERM): signal the process group of every running command.
    close(): end the spawners; running commands are killed.  Also on ``with`` exit; a
        command run after close() fails with stage "pool_closed".

    same_cpu_handoff: wake each spawner on the submitting thread's CPU, and the thread
    waiting for the reply on the spawner's (see docs/architecture.md, "The CPU hint");
    off by default (placement is the kernel scheduler's): builds measured faster without.

    Memory-aware admission (docs/features.md), off unless memory_budget is given:
    memory_budget: None or 'off' (default), 'auto' (what the machine and this process's
        cgroup have free, less a reserve), a size ('8G', '512M') or a number of bytes.
        Commands then start only while their predicted peaks fit, each runs in a cgroup
        of its slot (peak of the whole command, OOM kills, kill-all), and one killed by
        the OOM killer runs again once, alone.  ValueError for a malformed value.
    history: the SQLite file of the commands' peaks and durations across builds, or a
        History shared with the build's progress (None: no history).
    progress: the build's BuildProgress (status.py), told of every command.
    cgroup_parent: the cgroup directory the pool's cgroups go under (None: this
        process's memory cgroup).
    warning_prefix: what starts each line of the pool's warnings on stderr (an unusable
        history, no cgroups).

    Admission besides slots and memory (docs/architecture.md, "One admission point"): a
    command starts once it has everything at the same time, and holds nothing while it
    waits.
    jobserver: make's jobserver (jobserver.from_environ()), shared by the process's
        pools: each running command holds one of its job slots.
    local_slots: at most this many commands with ``Command.local`` run at once (0: no
        limit).
    stop_signal_fd: the read end of signal.set_wakeup_fd()'s pipe (interrupts.py): a
        stop signal there starts no more commands, before its handler has run.
    interrupt(sig=SIGINT): waiting and later commands return returncode -sig unstarted.
    """

    def __init__(self, slots=None, spawner=None, output_chunk_bytes=1 << 20,
                 same_cpu_handoff=False, memory_budget=None, history=None,
                 cgroup_parent=None, warning_prefix='spawnpool: warning: ',
                 jobserver=None, local_slots=0, stop_signal_fd=None,
                 progress=None):
        from . import spawner_path
        super().__init__(slots or os.cpu_count() or 1, spawner or spawner_path(),
                         output_chunk_bytes, same_cpu_handoff, memory_budget, history,
                         cgroup_parent, warning_prefix, jobserver, local_slots,
                         -1 if stop_signal_fd is None else stop_signal_fd, progress)

    def run(self, command=None, env=None, cwd=None, capture=False, merge_stderr=False,
            argv=None):
        if isinstance(command, Command):
            return _run(self, command)
        if argv is not None:            # the Popen-style form's keyword
            command = argv
        output = PASSTHROUGH if not capture else CAPTURE_MERGED if merge_stderr else CAPTURE
        command = Command(command, env, cwd, output)
        result = _run(self, command)
        if result.failure is not None:
            raise spawn_error(command, result)
        return result

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

