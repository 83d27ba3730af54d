"""A build trace in Chrome's trace-event format (open it in Perfetto or chrome://tracing).

The engine's (engine/src/stack/trace_writer.h, bound as ``_spawnpool.TraceWriter``): its
header says what the file holds, event by event and field by field, and how it stays
valid JSON after every event.  A build's trace is the engine's stack's own (stack.py maps
the ``trace`` option onto it; its trace layer records each command below the launcher,
without the GIL); this is the package's name for the writer, to record results by hand
(``add(result, line)``).

Thread-safe: one lock orders the writes.
"""

import os

from .pool import _spawnpool

__all__ = ['TraceWriter']


class TraceWriter:
    """Writes the trace to `path` (created or truncated now; OSError if it cannot be).
    `command_line`: the build's, for the report; `command_args()`: a dict of more args
    for the command just recorded, or None (called on its thread; an exception in it is
    ignored)."""

    __slots__ = ('path', '_engine', '_command_args')

    def __init__(self, path, process_name='spawnpool', command_line=None, command_args=None):
        self.path = os.fspath(path)
        self._engine = _spawnpool.TraceWriter(self.path, process_name, command_line or '')
        self._command_args = command_args

    def add(self, result, command):
        """Record one command's Result (`command`: its line, for the event's name)."""
        self._engine.add(result, command, self._command_args)

    def close(self):
        self._engine.close()

    @property
    def origin_ns(self):
        """CLOCK_MONOTONIC nanoseconds at creation: time 0 of the trace."""
        return self._engine.origin_ns

    @property
    def fd(self):
        """The file's descriptor, -1 once closed or stopped."""
        return self._engine.fd
