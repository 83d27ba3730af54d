"""Build statistics: what the commands cost, what the pool cost, how busy the slots were.

Per command it keeps running sums and the ten longest commands (a 10-entry heap), so a
build of any size costs constant memory.  Times come from the results (CLOCK_MONOTONIC):

- command time: from the start of the command's launch (its clone and exec, which any
  way of spawning pays) to its reap: ``Result.command_ns()``;
- pool overhead: from the slot taking the command to the launch, plus from the reap to
  the result in the caller's hands: ``Result.pool_overhead_ns()``, the hand-offs the
  spawn benchmark's hand-off diagnostic times (its no-spawn round trip);
- queue wait: from submit to a free slot (``dispatched_ns - submitted_ns``), apart;
- slot utilization: total command time / (slots x build wall), where the build wall is
  from the first submit to the last result;
- with memory admission (Result.predicted_peak_bytes set): what measured the peaks
  (``Result.memory_mode``, as the trace says it for the report), the commands delayed for
  memory (``memory_wait_ns``, time waited while a slot was free) and their total delay,
  OOM retries, and the prediction error ``|predicted - measured| / measured`` at p50 and
  p90, from a histogram of 1% buckets (constant memory).

Thread-safe: one lock around the sums.
"""

import heapq
import itertools
import math
import threading
import time

__all__ = ['Stats']

_LONGEST = 10
_ERROR_BUCKETS = 1001          # prediction error in whole percent, 1000 holding >= 1000%


class Stats:
    def __init__(self, slots=0):
        self._lock = threading.Lock()
        self.slots = slots          # the most slots the pool had (a resize can change it)
        self.commands = 0           # commands recorded, started or not
        self.failed = 0             # non-zero status, or never started
        self.unstarted = 0
        self.command_ns = 0
        self.overhead_ns = 0
        self.queue_ns = 0
        self.first_ns = None        # earliest submit
        self.last_ns = None         # latest completion
        self._longest = []          # min-heap of (command_ns, seq, command)
        self._seq = itertools.count()
        # Memory admission: counted only for results that carry a prediction.
        self.predicted = 0          # commands with a prediction and a measured peak
        self.under_predicted = 0
        self.delayed = 0            # commands that waited for memory with a slot free
        self.memory_wait_ns = 0
        self.oom_retries = 0
        self.oom_failed = 0         # killed again when run alone
        self._errors = None         # [count per whole percent of error], once needed
        self.memory_mode = None     # Result.memory_mode of the first measured command

    def note_slots(self, slots):
        with self._lock:
            self.slots = max(self.slots, slots)

    def add(self, result, command):
        """Record one command's Result (`command`: its line, for the longest list)."""
        if result.failure is not None:
            self._add_unstarted(result.completed_ns or time.monotonic_ns())
            return
        wall = result.command_ns()
        entry = (wall, next(self._seq), command)
        with self._lock:
            self.commands += 1
            if result.returncode != 0:
                self.failed += 1
            self.command_ns += wall
            self.overhead_ns += result.pool_overhead_ns()
            self.queue_ns += result.dispatched_ns - result.submitted_ns
            self._span(result.submitted_ns, result.completed_ns)
            if result.predicted_peak_bytes:
                self._add_memory(result)
            if len(self._longest) < _LONGEST:
                heapq.heappush(self._longest, entry)
            elif wall > self._longest[0][0]:
                heapq.heapreplace(self._longest, entry)

    def _add_memory(self, result):
        # Under the lock.
        if result.memory_wait_ns > 0:
            self.delayed += 1
            self.memory_wait_ns += result.memory_wait_ns
        if self.memory_mode is None:
            self.memory_mode = result.memory_mode
        self.oom_retries += result.oom_retries
        self.oom_failed += bool(result.oom_killed)
        peak = result.peak_memory_bytes
        if peak > 0:
            error = abs(result.predicted_peak_bytes - peak) * 100 // peak
            if self._errors is None:
                self._errors = [0] * _ERROR_BUCKETS
            self._errors[min(error, _ERROR_BUCKETS - 1)] += 1
            self.predicted += 1
            self.under_predicted += result.predicted_peak_bytes < peak

    def prediction_error(self, fraction):
        """The prediction error (percent of the measured peak) at quantile `fraction`,
        or None before any prediction met its measurement."""
        with self._lock:
            return self._error_locked(fraction)

    def _error_locked(self, fraction):
        if not self.predicted:
            return None
        rank = max(1, math.ceil(self.predicted * fraction))
        seen = 0
        for percent, count in enumerate(self._errors):
            seen += count
            if seen >= rank:
                return percent
        return _ERROR_BUCKETS - 1

    def _add_unstarted(self, when_ns):
        with self._lock:
            self.commands += 1
            self.failed += 1
            self.unstarted += 1
            self._span(when_ns, when_ns)

    def longest(self):
        """[(seconds, command)] of the longest commands, longest first."""
        with self._lock:
            entries = sorted(self._longest, reverse=True)
        return [(ns / 1e9, command) for ns, _, command in entries]

    def build_wall(self):
        """Seconds from the first submit to the last result (0 before any command)."""
        if self.first_ns is None:
            return 0.0
        return (self.last_ns - self.first_ns) / 1e9

    def utilization(self):
        """Share of the slots' time spent running commands, 0..1."""
        wall = self.build_wall()
        if wall <= 0 or self.slots <= 0:
            return 0.0
        return self.command_ns / 1e9 / (self.slots * wall)

    def report(self, prefix='spawnpool'):
        """The statistics as text, one line per figure."""
        with self._lock:
            ran = self.commands - self.unstarted
            lines = ['%s: statistics' % prefix]
            failed = '%d failed' % self.failed
            if self.unstarted:
                failed += ' (%d did not start)' % self.unstarted
            lines.append('  commands:           %d run, %s' % (self.commands, failed))
            lines.append('  command time:       total %s, mean %s'
                         % (_seconds(self.command_ns), _per(self.command_ns, ran)))
            lines.append('  pool overhead:      mean %s per command (slot to launch + reap '
                         'to result)' % _per(self.overhead_ns, ran))
            lines.append('  queue wait:         mean %s per command, total %s'
                         % (_per(self.queue_ns, ran), _seconds(self.queue_ns)))
            lines.append('  slot utilization:   %.1f%% (%d slots, %.3f s from first submit '
                         'to last result)' % (100 * self.utilization(), self.slots,
                                              self.build_wall()))
            lines += self._memory_lines()
        longest = self.longest()
        if longest:
            lines.append('  longest commands:')
            for seconds, command in longest:
                lines.append('    %9.3f s  %s' % (seconds, _one_line(command)))
        return '\n'.join(lines) + '\n'

    def _memory_lines(self):
        # Under the lock.
        mode = ['  memory measured by: %s' % self.memory_mode] if self.memory_mode else []
        if not self.predicted and not self.delayed and not self.oom_retries:
            return mode     # no command of this build went through memory admission
        p50, p90 = self._error_locked(0.5), self._error_locked(0.9)
        lines = mode + ['  delayed for memory: %d commands, %s in all'
                 % (self.delayed, _seconds(self.memory_wait_ns)),
                 '  OOM retries:        %d (%d killed again when run alone)'
                 % (self.oom_retries, self.oom_failed)]
        if p50 is not None:
            lines.append('  prediction error:   p50 %d%%, p90 %d%% of the measured peak (%d '
                         'commands, %d under-predicted)' % (p50, p90, self.predicted,
                                                             self.under_predicted))
        return lines

    def _span(self, start_ns, end_ns):
        if self.first_ns is None or start_ns < self.first_ns:
            self.first_ns = start_ns
        if self.last_ns is None or end_ns > self.last_ns:
            self.last_ns = end_ns


def _seconds(ns):
    return '%.3f s' % (ns / 1e9)


def _per(ns, count):
    if not count:
        return '-'
    return '%.3f ms' % (ns / count / 1e6)


def _one_line(command):
    command = command.replace('\n', ' ')
    return command if len(command) <= 160 else command[:157] + '...'
