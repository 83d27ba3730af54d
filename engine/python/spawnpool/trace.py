"""A build trace in Chrome's trace-event format (open it in Perfetto or chrome://tracing).

One complete event ("ph": "X") per command on the thread of its slot (tid = slot), from
the start of its launch to its reap (Result.command_ns()); args hold the command line, exit status, CPU times, max
RSS, queue wait and the pool's own overhead.  A command that never started is an instant
event ("ph": "i") at the moment it was refused.

With memory admission (Result.predicted_peak_bytes set) each command's args add its peak,
prediction and memory wait; a counter track ("ph": "C", "memory in use") shows at each
dispatch what the running commands were predicted to use and what the pool's cgroup
measured; an OOM retry is an instant event on its slot where the second run starts.

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


class TraceWriter:
    """Writes the trace to `path` (created or truncated now)."""

    def __init__(self, path, process_name='spawnpool'):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._origin_ns = time.monotonic_ns()   # CLOCK_MONOTONIC, as the results' times
        self._slots_named = set()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                           0o666)
        self._end = len(_HEAD)     # where the tail starts: the next event goes there
        self._first = True
        os.write(self._fd, _HEAD + _TAIL)
        self._append({'name': 'process_name', 'ph': 'M', 'pid': self._pid, 'tid': 0,
                      'args': {'name': process_name}})

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
        extra = self._memory_events(result, event['args']) if result.predicted_peak_bytes else ()
        with self._lock:
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


def _short(command):
    """A slice title: the command line, cut to what a timeline can show."""
    return command if len(command) <= 80 else command[:77] + '...'
