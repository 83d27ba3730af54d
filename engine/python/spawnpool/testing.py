"""`FakeRunner`: a runner that runs nothing, for tests of everything above a runner;
`RecordingPrinter`: a console printer that keeps what the layers print through it.

The one fake the test suites share (tests/scons, tests/distributed, tests/cli, ...) and
that embedders may use for their own scheduler tests: it records each Command, answers
with a scripted Result (a fresh copy each time, since layers adjust results on their way
up), may take its time, and counts how many commands it had at once, per kind.  Like the
pool, after `interrupt(sig)` it starts nothing: commands come back with returncode -sig.

Thread-safe: run() is called from many threads; the records are under one lock.
"""

import threading
import time

from .command import Result

__all__ = ['FakeRunner', 'RecordingPrinter']


class FakeRunner:
    """answer: a Result, or a callable(command) -> Result (default: exit status 0);
    seconds: how long each run() takes; kind: a callable(command) -> a key under which
    `most` counts the commands that ran at once (default: one key, None)."""

    def __init__(self, answer=None, seconds=0.0, kind=None):
        self.answer = answer if answer is not None else Result(returncode=0)
        self.seconds = seconds
        self.kind = kind or (lambda command: None)
        self.commands = []          # every Command run, in order
        self.most = {}              # kind -> the most that ran at once
        self._now = {}
        self._interrupted = 0
        self._lock = threading.Lock()

    def interrupt(self, sig):
        """As Pool.interrupt: later commands are not run and return -sig."""
        self._interrupted = self._interrupted or sig

    def run(self, command):
        if self._interrupted:
            return Result(returncode=-self._interrupted)
        kind = self.kind(command)
        with self._lock:
            self.commands.append(command)
            self._now[kind] = self._now.get(kind, 0) + 1
            self.most[kind] = max(self.most.get(kind, 0), self._now[kind])
        try:
            if self.seconds:
                time.sleep(self.seconds)
            answer = self.answer(command) if callable(self.answer) else self.answer
            return Result(**vars(answer))
        finally:
            with self._lock:
                self._now[kind] -= 1

    @property
    def argvs(self):
        """The argv of every command run, in order."""
        return [command.argv for command in self.commands]


class RecordingPrinter:
    """A console printer (output_sync.set_console_printer: what a status line installs)
    that keeps each write as (fd, bytes) in `writes`, copied: the engine lends a block's
    views of its buffers for the call's length only."""

    def __init__(self):
        self.writes = []

    def write(self, fd, data):
        self.writes.append((fd, bytes(data)))
