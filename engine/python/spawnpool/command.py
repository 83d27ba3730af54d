"""What every runner takes and gives back: `Command` in, `Result` out.

A runner is any object with ``run(command) -> Result``: the pool (`spawnpool.Pool`), the
stock `PopenRunner`, the tests' `FakeRunner`, and every layer stacked on one of them
(stack.py).  The shape is the C++ API's (``Result Pool::run(const Command&)``).

Failures are data: a command that never started (not found, a bad cwd, arguments too big
for exec, its spawner died, the pool was closed) comes back as a Result whose `failure`
names the stage, with `error_number` (errno) and `error_message`.  Only a caller that
wants Popen's behaviour turns it into an exception, with `spawn_error()` (the one raising
wrapper; ``Pool.run(argv, ...)`` and the SCons plugin use it).

The defaults are decided here and nowhere else: a Command's cwd is the current directory
when the Command is made (as absolute path); its env None means this process's
environment (`os.environ`) when it runs.

Plain values; no threading concerns.
"""

import errno
import os
import types

__all__ = ['Command', 'Result', 'SpawnError', 'SpawnerDied', 'spawn_error',
           'PASSTHROUGH', 'CAPTURE', 'CAPTURE_MERGED', 'STAGES']

#: Output modes (C++ OutputMode): the command writes to this process's stdout/stderr;
#: both are captured into Result.stdout/stderr; stderr is captured into stdout, in the
#: order written (Result.stderr is None).
PASSTHROUGH = 'passthrough'
CAPTURE = 'capture'
CAPTURE_MERGED = 'capture_merged'

#: Result.failure values (C++ FailureStage): refused before anything ran (E2BIG, a NUL
#: byte); the cwd could not be entered; the program could not be executed; the spawner's
#: own set-up failed; the spawner died while serving it (it may have run: never re-run
#: it); the pool was closed.
STAGES = ('request', 'chdir', 'exec', 'spawner', 'spawner_died', 'pool_closed')

_getcwd = os.getcwd
# Result.memory_source -> the build's memory mode, as the statistics and the report say it.
_MEMORY_MODES = {'cgroup': 'cgroup per command',
                 'cgroup_sampled': 'cgroup per command, memory.current sampled',
                 'rusage': 'largest process (ru_maxrss)'}
_fspath = os.fspath


class Command:
    """One command: argv (argv[0] is searched on PATH from env, as execvp does), env (a
    complete mapping, or None: this process's environment), cwd (None: the current
    directory now), the output mode, and `local`: whether it counts against the pool's
    local slots (with a compiler launcher, every command not sent through it)."""

    __slots__ = ('argv', 'env', 'cwd', 'output', 'local')

    def __init__(self, argv, env=None, cwd=None, output=PASSTHROUGH, local=True):
        self.argv = argv
        self.env = env
        if cwd is None:
            cwd = _getcwd()
        elif cwd.__class__ is not str or cwd[:1] != '/':
            cwd = _absolute(cwd)
        self.cwd = cwd
        self.output = output
        self.local = local

    @property
    def environment(self):
        """The environment the command gets (env, or os.environ when env is None)."""
        return os.environ if self.env is None else self.env

    def __repr__(self):
        return '<spawnpool.Command %r cwd=%r output=%s>' % (self.argv, self.cwd, self.output)


def _absolute(cwd):
    cwd = _fspath(cwd)
    if isinstance(cwd, bytes):
        return cwd if cwd[:1] == b'/' else os.path.join(os.getcwdb(), cwd)
    return cwd if cwd[:1] == '/' else os.path.join(_getcwd(), cwd)


class Result(types.SimpleNamespace):
    """The outcome of one command, from any runner.  Made with keywords; a field nobody
    set has the default below (0 for a number a runner does not measure)."""

    returncode = -1         # exit status, or -N for signal N (as Popen); -1 if it never ran
    failure = None          # None: it ran; else the stage that failed (see STAGES)
    error_number = 0        # errno of the failure
    error_message = ''      # a sentence naming what failed
    stdout = None           # bytes when captured
    stderr = None           # bytes when captured apart (None when merged into stdout)
    user_time = 0.0         # seconds of CPU of the command and its waited-for children
    system_time = 0.0
    wall_time = 0.0         # seconds from the child's start to its exit
    max_rss_kb = 0
    slot = -1               # the pool slot that ran it, -1 if none did
    # CLOCK_MONOTONIC nanoseconds: submitted, had a slot, child started, child reaped,
    # result in the caller's hands.  0 where the runner does not know.
    submitted_ns = 0
    dispatched_ns = 0
    started_ns = 0
    exited_ns = 0
    completed_ns = 0
    # Reported by the engine as it learns to: the spawner took the request, and the
    # launch began (pool overhead apart from the program's own start-up).
    received_ns = 0
    launch_ns = 0
    # Memory (issue 12): peak of the command (0 unknown), where the figure comes from
    # (None, 'rusage', 'cgroup', 'cgroup_sampled'), an OOM kill and its retries, the admission's forecast
    # (0: none); at its dispatch, the running commands' predicted peaks and the pool
    # cgroup's measured usage (0: unknown, as without slot cgroups).
    peak_memory_bytes = 0
    memory_source = None
    oom_killed = False
    oom_retries = 0
    predicted_peak_bytes = 0
    # What it waited for before it started (the pool's scheduler names the reason): a
    # free slot, memory while a slot was free, a local slot, a make jobserver token.
    slot_wait_ns = 0
    memory_wait_ns = 0
    local_slot_wait_ns = 0
    jobserver_wait_ns = 0
    predicted_in_use_bytes = 0
    measured_in_use_bytes = 0

    @property
    def memory_mode(self):
        """What measured this command's peak, as the statistics and the build report name
        the build's memory mode: 'cgroup per command' (the command's cgroup's peak, or its
        slot's on v1), 'cgroup per command, memory.current sampled' (v2 without
        memory.peak, before 5.19), 'largest process (ru_maxrss)' (no slot cgroup: a
        read-only or unwritable tree), or None."""
        return _MEMORY_MODES.get(self.memory_source)

    @property
    def started(self):
        return self.failure is None

    def command_ns(self):
        """The command's own time: from the start of its launch (clone and exec included,
        as any spawn pays them) to its reap."""
        return self.exited_ns - (self.launch_ns or self.started_ns)

    def pool_overhead_ns(self):
        """What the pool added to the command: from the slot taking it to the launch
        (hand-off, decoding, PATH search), and from the reap to the result in the caller's
        hands.  Runners that do not report the launch count from the child's start."""
        return (((self.launch_ns or self.started_ns) - self.dispatched_ns)
                + (self.completed_ns - self.exited_ns))

    def failure_text(self):
        """Why it never started, for a message ('' if it did)."""
        if self.failure is None:
            return ''
        if self.failure == 'spawner_died':     # the message says it all
            return self.error_message
        return '%s (stage %s)' % (self.error_message, self.failure)

    def __repr__(self):
        if self.failure is None:
            return '<spawnpool.Result returncode=%d>' % self.returncode
        return '<spawnpool.Result failure=%s errno=%d: %s>' % (
            self.failure, self.error_number, self.error_message)


class SpawnError(OSError):
    """A command that never started, raised for callers that want Popen's behaviour.

    errno, strerror and filename are what Popen's OSError would carry (filename: the
    program for exec failures and E2BIG, the directory for chdir); `stage` is
    Result.failure and str() is the engine's sentence (`message`)."""

    def __init__(self, number, message, filename=None, stage=None):
        super().__init__(number, os.strerror(number) if number else message, filename)
        self.message = message
        self.stage = stage

    def __str__(self):
        return self.message or super().__str__()


class SpawnerDied(SpawnError):
    """The spawner died while it served the command (which may have run)."""


def spawn_error(command, result):
    """The exception for `result` of `command`, which never started (the raising wrapper)."""
    stage = result.failure
    filename = None
    if stage == 'exec' or stage == 'request' and result.error_number == errno.E2BIG:
        filename = command.argv[0] if command.argv else None
    elif stage == 'chdir':
        filename = command.cwd
    kind = SpawnerDied if stage == 'spawner_died' else SpawnError
    return kind(result.error_number, result.error_message, filename, stage)

