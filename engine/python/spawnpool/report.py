"""The build report (issue 18): one self-contained HTML page drawn from a build's Chrome
trace (trace.py): the slots' timeline, parallelism and memory over time, the longest
commands, the waits, the failed commands with their output and the critical path.

The page and the code that fills it are the engine's (engine/src/report); this module
is their Python face, used by ``spawnpool report TRACE -o FILE`` (cli.py).  The
``report`` option of a build (``--report=FILE``, ``--process-spawner-report=FILE``) is
the engine's session's (SessionOptions::report_path; stack.py maps it).  Stateless:
safe from any thread.
"""

__all__ = ['write_report']


def write_report(trace_path, report_path):
    """Write the report of the trace at `trace_path` to `report_path` (replaced whole).
    Returns '' on success, else a sentence saying what failed (an unreadable trace, a
    file that is not a trace, a write error, or no compiled module to do it)."""
    try:
        from . import _spawnpool
    except ImportError as e:
        return "spawnpool's compiled module does not load (%s)" % e
    return _spawnpool.write_build_report(trace_path, report_path)
