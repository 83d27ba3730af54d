"""Running shell command lines on a pool, with the optional build features.

`ShellRunner.run(pool, [sh, '-c', line], env, cwd)` is what a build driver's spawn
function calls per command (the SCons plugin and ``spawnpool run`` both do).  It adds,
each only when asked for:

- direct exec: a line with no shell syntax runs as its program (see direct_exec.py);
  one whose program cannot start is re-run through sh, so sh reports it in its words;
- synchronized output: captured, then printed as one block (see output_sync.py);
- a trace file and statistics (see trace.py, stats.py), fed with every result.

Returns the status sh would have returned; a command that cannot start at all (sh itself
missing, a bad cwd) raises SpawnError as Pool.run() does, after being recorded.

Thread-safe: run() is called from many threads at once; the features lock what they share.
Kept lean: it runs once per command, thousands of times per build.
"""

import os
import time

from ._spawnpool import SpawnError, SpawnerDied
from .direct_exec import direct_argv, sh_status, shell_env
from .output_sync import OutputSync, write_all

__all__ = ['ShellRunner']

_monotonic_ns = time.monotonic_ns
_getcwd = os.getcwd


class ShellRunner:
    """Options are fixed at construction; `observers` get add()/add_unstarted() calls.

    output: 'passthrough' (the command writes to our stdout/stderr as it goes), 'sync'
    (blocks on fds 1 and 2), or an OutputSync writing elsewhere; direct_exec: run simple
    lines without the shell; trace: a TraceWriter or None; stats: a Stats or None.
    """

    def __init__(self, output='passthrough', direct_exec=False, trace=None, stats=None):
        if isinstance(output, OutputSync):
            self.sync = output
        elif output in ('passthrough', 'sync'):
            self.sync = OutputSync() if output == 'sync' else None
        else:
            raise ValueError('output must be "passthrough" or "sync", not %r' % (output,))
        self.direct_exec = bool(direct_exec)
        self.trace = trace
        self.stats = stats
        self._observers = tuple(o for o in (trace, stats) if o is not None)
        self._run_options = self.sync.run_options() if self.sync else {}

    def run(self, pool, argv, env=None, cwd=None):
        """Run ``argv`` (usually ``[sh, '-c', line]``); returns the status sh would give."""
        command = argv[-1] if len(argv) == 3 and argv[1] == '-c' else ' '.join(argv)
        note = None
        result = None
        try:
            words = direct_argv(argv) if self.direct_exec else None
            if words is not None:
                if cwd is None:
                    cwd = _getcwd()
                if isinstance(cwd, str) and cwd[:1] == '/':   # else: PWD unknown, use sh
                    result = self._try_direct(pool, words, env, cwd)
            if result is None:
                result = pool.run(argv, env=env, cwd=cwd, **self._run_options)
                status = result.returncode
            else:
                status, note = sh_status(result.returncode)
        except SpawnError as e:
            for observer in self._observers:
                observer.add_unstarted(command, e, _monotonic_ns())
            raise
        if self.sync is not None:
            self.sync.emit(result.stdout, result.stderr, note)
        elif note:
            write_all(2, note)
        for observer in self._observers:
            observer.add(result, status, command)
        return status

    def _try_direct(self, pool, words, env, cwd):
        """The result of running `words` directly, or None if the program did not start."""
        if env is None:
            env = os.environ
        if 'PATH' not in env and '/' not in words[0]:
            return None         # dash's default PATH is not execvp's: let sh search
        try:
            return pool.run(words, env=shell_env(env, cwd), cwd=cwd, **self._run_options)
        except SpawnerDied:
            raise               # it may have run: never run it twice
        except SpawnError as e:
            if e.stage == 'exec':
                return None     # nothing ran; sh will say why, as it always would
            raise
