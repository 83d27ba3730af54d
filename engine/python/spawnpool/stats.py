"""Build statistics: what the commands cost, what the pool cost, how busy the slots were.

The engine's (engine/src/stack/build_statistics.h, bound as
``_spawnpool.BuildStatistics``): the sums, the ten longest commands, the memory
prediction error and the end-of-build report text are kept and written in C++; this is
the package's name for them.  Times come from the results (CLOCK_MONOTONIC): command time
``Result.command_ns()``, pool overhead ``Result.pool_overhead_ns()``, queue wait
``dispatched_ns - submitted_ns``, slot utilization total command time / (slots x build
wall), the build wall from the first submit to the last result.

Thread-safe: the engine's statistics keep one lock around the sums.
"""

from .pool import _spawnpool

__all__ = ['Stats']


class Stats:
    """Stats(slots=0): add(result, command) per command; report(prefix) the text."""

    __slots__ = ('_engine',)

    def __init__(self, slots=0):
        self._engine = _spawnpool.BuildStatistics(slots)

    def note_slots(self, slots):
        self._engine.note_slots(slots)

    def add(self, result, command):
        """Record one command's Result (`command`: its line, for the longest list)."""
        self._engine.add(result, command)

    def report(self, prefix='spawnpool'):
        """The statistics as text, one line per figure."""
        return self._engine.report(prefix)

    def prediction_error(self, fraction):
        """The prediction error (percent of the measured peak) at quantile `fraction`,
        or None before any prediction met its measurement."""
        return self._engine.prediction_error(fraction)

    def longest(self):
        """[(seconds, command)] of the longest commands, longest first."""
        return self._engine.longest()

    def build_wall(self):
        """Seconds from the first submit to the last result (0 before any command)."""
        return self._engine.totals().build_wall

    def utilization(self):
        """Share of the slots' time spent running commands, 0..1."""
        return self._engine.totals().utilization

    # The sums so far (read-only).
    slots = property(lambda self: self._engine.totals().slots)
    commands = property(lambda self: self._engine.totals().commands)
    failed = property(lambda self: self._engine.totals().failed)
    unstarted = property(lambda self: self._engine.totals().unstarted)
    command_ns = property(lambda self: self._engine.totals().command_ns)
    overhead_ns = property(lambda self: self._engine.totals().overhead_ns)
    queue_ns = property(lambda self: self._engine.totals().queue_ns)
