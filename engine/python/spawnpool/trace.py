"""A build trace in Chrome's trace-event format (open it in Perfetto or chrome://tracing).

One complete event ("ph": "X") per command on the thread of its slot (tid = slot), from
the start of its launch to its reap (Result.command_ns()); args hold the command line,
exit status, CPU times, max RSS, queue wait (and, of it, what the pool's scheduler says
the command waited for: a slot, a local slot, a jobserver token) and the pool's own
overhead.  A command that never started is an instant event ("ph": "i") at the moment it
was refused.

With memory admission (Result.predicted_peak_bytes set) each command's args add its peak,
prediction and memory wait; a counter track ("ph": "C", "memory in use") shows at each
dispatch what the running commands were predicted to use and what the pool's cgroup
measured; an OOM retry is an instant event on its slot where the second run starts.

For the build report (engine/src/report, `spawnpool report`): a metadata event
``spawnpool_build`` holds the build's command line and, once known, what measured the
memory; a failed command whose output was captured (output sync, a caller's capture)
keeps it in args ``output``; and `command_args`, a callable run on the thread that ran
the command, may add fields of its own (the SCons plugin: the ``targets`` and ``inputs``
of the action, from which the report draws the critical path).

The file is valid JSON after every event, not only at the end: it is written as
``{"traceEvents":[ ...events... ],"displayTimeUnit":"ms"}`` and each new event goes in
with one pwrite() over the closing tail, carrying a new tail behind it.  So a build that
fails, is interrupted, or is killed leaves a complete file holding every command that
finished; only a crash inside that one write (or of the machine) can cut it short.

Thread-safe: one lock orders the writes.
"""

import json
import os
import sys
import threading
import time

__all__ = ['TraceWriter']

_HEAD = b'{"traceEvents":['
_TAIL = b'\n],"displayTimeUnit":"ms"}\n'
_dumps = json.JSONEncoder(separators=(',', ':'), ensure_ascii=True).encode
_MIB = float(1 << 20)
# What the pool's scheduler says a command waited for (Result.NAME_wait_ns), each in the
# args as NAME_wait_ms when it waited; memory_wait_ms comes with the memory figures.
_WAITS = ('slot', 'local_slot', 'jobserver')
_OUTPUT_CHARS = 16000       # a failed command's output kept in the trace, at most


class TraceWriter:
    """Writes the trace to `path` (created or truncated now).  `command_line`: the
    build's, for the report; `command_args()`: a dict of more args for the command just
    recorded, or None (called on its thread; an exception in it is ignored)."""

    def __init__(self, path, process_name='spawnpool', command_line=None, command_args=None):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._origin_ns = time.monotonic_ns()   # CLOCK_MONOTONIC, as the results' times
        self._slots_named = set()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                           0o666)
        self._end = len(_HEAD)     # where the tail starts: the next event goes there
        self._first = True
        self._command_args = command_args
        self._memory_mode = None    # written once, at the first command measured
        os.write(self._fd, _HEAD + _TAIL)
        self._append({'name': 'process_name', 'ph': 'M', 'pid': self._pid, 'tid': 0,
                      'args': {'name': process_name}})
        if command_line:
            self._append(self._build_info(command_line=command_line))

    def add(self, result, command):
        """Record one command's Result (`command`: its line, for the event's name)."""
        if result.failure is not None:
            self._add_unstarted(result, command)
            return
        queue_ns = result.dispatched_ns - result.submitted_ns
        overhead_ns = result.pool_overhead_ns()
        event = {
            'name': _short(command), 'cat': 'command', 'ph': 'X',
            'pid': self._pid, 'tid': result.slot,
            'ts': self._us(result.launch_ns or result.started_ns),
            'dur': round(result.command_ns() / 1000.0, 3),
            'args': {
                'command': command,
                'returncode': result.returncode,
                'user_time_s': round(result.user_time, 6),
                'system_time_s': round(result.system_time, 6),
                'max_rss_kb': result.max_rss_kb,
                'queue_wait_ms': round(queue_ns / 1e6, 3),
                'pool_overhead_ms': round(overhead_ns / 1e6, 3),
            },
        }
        args = event['args']
        for reason in _WAITS:
            waited = getattr(result, reason + '_wait_ns', 0)
            if waited:
                args[reason + '_wait_ms'] = round(waited / 1e6, 3)
        if result.returncode != 0:
            output = _output(result)
            if output is not None:
                args['output'] = output
        if self._command_args is not None:
            try:
                args.update(self._command_args() or ())
            except Exception:       # the trace must never fail the build
                pass
        extra = self._memory_events(result, args) if result.predicted_peak_bytes else ()
        mode = result.memory_mode if extra else None
        with self._lock:
            if mode and self._memory_mode is None:
                self._memory_mode = mode
                self._append_locked(self._build_info(memory_mode=mode))
            if result.slot not in self._slots_named:
                self._slots_named.add(result.slot)
                self._append_locked(self._thread_name(result.slot))
            self._append_locked(event)
            for memory_event in extra:
                self._append_locked(memory_event)

    def _memory_events(self, result, args):
        """Adds the memory figures to `args`; the counter and OOM events to write."""
        args.update(peak_memory_mib=round(result.peak_memory_bytes / _MIB, 1),
                    memory_source=result.memory_source,
                    predicted_peak_mib=round(result.predicted_peak_bytes / _MIB, 1),
                    memory_wait_ms=round(result.memory_wait_ns / 1e6, 3))
        events = [{'name': 'memory in use', 'ph': 'C', 'pid': self._pid,
                   'ts': self._us(result.dispatched_ns),
                   'args': {'predicted_MiB': round(result.predicted_in_use_bytes / _MIB, 1),
                            'measured_MiB': round(result.measured_in_use_bytes / _MIB, 1)}}]
        if result.oom_retries or result.oom_killed:
            args.update(oom_retries=result.oom_retries, oom_killed=result.oom_killed)
        if result.oom_retries:
            events.append({'name': 'OOM kill: run again alone', 'cat': 'memory', 'ph': 'i',
                           's': 't', 'pid': self._pid, 'tid': result.slot,
                           'ts': self._us(result.started_ns)})
        return events

    def _add_unstarted(self, result, command):
        self._append({
            'name': _short(command), 'cat': 'command', 'ph': 'i', 's': 'p',
            'pid': self._pid, 'tid': 0, 'ts': self._us(result.completed_ns or time.monotonic_ns()),
            'args': {'command': command, 'error': result.error_message,
                     'stage': result.failure},
        })

    def close(self):
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _build_info(self, **args):
        """The report reads these (the page merges every spawnpool_build event)."""
        return {'name': 'spawnpool_build', 'ph': 'M', 'pid': self._pid, 'tid': 0,
                'args': args}

    def _thread_name(self, slot):
        return {'name': 'thread_name', 'ph': 'M', 'pid': self._pid, 'tid': slot,
                'args': {'name': 'slot %d' % slot}}

    def _us(self, ns):
        return round((ns - self._origin_ns) / 1000.0, 3)

    def _append(self, event):
        with self._lock:
            self._append_locked(event)

    def _append_locked(self, event):
        if self._fd < 0:
            return
        body = (b'\n' if self._first else b',\n') + _dumps(event).encode()
        try:
            # One write that replaces the old tail: the file is valid before and after.
            data = body + _TAIL
            written = os.pwrite(self._fd, data, self._end)
            if written != len(data):
                raise OSError('short write')
        except OSError as e:
            # A full disk must not fail the build: put the old tail back (those bytes
            # exist, so this needs no new space), stop tracing, say so once.
            try:
                os.pwrite(self._fd, _TAIL, self._end)
                os.ftruncate(self._fd, self._end + len(_TAIL))
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1
            sys.stderr.write('spawnpool: trace %s: %s; tracing stopped\n' % (self.path, e))
            return
        self._end += len(body)
        self._first = False


def _output(result):
    """A command's captured output as text (its start, if long), or None if not captured."""
    if result.stdout is None and result.stderr is None:
        return None
    data = (result.stdout or b'') + (result.stderr or b'')
    text = data.decode('utf-8', 'replace')
    if len(text) > _OUTPUT_CHARS:
        text = text[:_OUTPUT_CHARS] + '\n... (%d more characters)' % (len(text) - _OUTPUT_CHARS)
    return text


def _short(command):
    """A slice title: the command line, cut to what a timeline can show."""
    return command if len(command) <= 80 else command[:77] + '...'
