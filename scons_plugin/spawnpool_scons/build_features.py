"""The build features of ``scons --process-spawner``: output sync, trace, stats, direct exec.

Adds the options and, when the pool starts, turns their values into one
`spawnpool.ShellRunner` that the plugin's SPAWN path hands each command to (None when
every option is at its default: the plain path stays as it was).  See docs/features.md.

    --process-spawner-output=passthrough|sync
    --process-spawner-trace=FILE
    --process-spawner-stats
    --process-spawner-direct-exec=yes|no

Threading: `runner()` and `finish()` are called with the plugin's lock held or at exit;
the runner itself is thread-safe.
"""

import os
import sys

__all__ = ['add_options', 'runner', 'record', 'finish']

_OUTPUT = ('--process-spawner-output', 'process_spawner_output')
_TRACE = ('--process-spawner-trace', 'process_spawner_trace')
_STATS = ('--process-spawner-stats', 'process_spawner_stats')
_DIRECT = ('--process-spawner-direct-exec', 'process_spawner_direct_exec')

# SCons' top directory (it has already applied -C/-u when site_init runs): a relative trace
# path is taken from here, not from whatever a chdir= action made the cwd at pool start.
_top_dir = None


def add_options(add_option, has_option):
    """AddOption each option that another copy of the plugin has not added yet."""
    global _top_dir
    _top_dir = os.getcwd()
    specs = [
        (_OUTPUT, dict(type='choice', choices=['passthrough', 'sync'], default='passthrough',
                       metavar='MODE', help='with --process-spawner: passthrough (default) '
                       "or sync: print each command's output as one block when it ends")),
        (_TRACE, dict(type='string', default=None, metavar='FILE',
                      help='with --process-spawner: write a Chrome trace-event file of '
                           'the commands (Perfetto, chrome://tracing)')),
        (_STATS, dict(action='store_true', default=False,
                      help='with --process-spawner: print command and pool statistics '
                           'at the end')),
        (_DIRECT, dict(type='choice', choices=['yes', 'no'], default=None, metavar='yes|no',
                       help='with --process-spawner: run commands without shell syntax '
                            'without sh (default: yes)')),
    ]
    for (flag, dest), kw in specs:
        if has_option is None or not has_option(flag):
            add_option(flag, dest=dest, **kw)


def runner(values, spawnpool, slots):
    """A ShellRunner for the options in `values`, or None when all are at their defaults."""
    from spawnpool.direct_exec import ENABLED_BY_DEFAULT
    output = getattr(values, _OUTPUT[1], None) or 'passthrough'
    trace_path = getattr(values, _TRACE[1], None)
    want_stats = bool(getattr(values, _STATS[1], False))
    direct = getattr(values, _DIRECT[1], None)
    direct = ENABLED_BY_DEFAULT if direct is None else direct == 'yes'
    if output == 'passthrough' and not trace_path and not want_stats and not direct:
        return None
    trace = None
    if trace_path:
        try:
            trace = spawnpool.TraceWriter(os.path.join(_top_dir or os.getcwd(), trace_path),
                                          process_name='scons')
        except OSError as e:
            # sys.__stderr__: a Configure check may be what started the pool, and SCons
            # points sys.stderr at config.log while it runs.
            (sys.__stderr__ or sys.stderr).write('scons: warning: %s: cannot write %s: %s\n'
                                                 % (_TRACE[0], trace_path, e.strerror or e))
    stats = spawnpool.Stats(slots=slots) if want_stats else None
    return spawnpool.ShellRunner(output=output, direct_exec=direct, trace=trace, stats=stats)


def record(runner_, result, status, argv):
    """Feed a command the plugin ran itself (a Configure check) to the trace and stats."""
    command = argv[-1] if argv else ''
    for observer in (runner_.trace, runner_.stats):
        if observer is not None:
            observer.add(result, status, command)


def finish(runner_):
    """At exit: close the trace, print the statistics (after SCons' last line)."""
    if runner_.trace is not None:
        runner_.trace.close()
    if runner_.stats is not None:
        out = sys.__stdout__ or sys.stdout
        out.write(runner_.stats.report(prefix='scons: spawnpool'))
        out.flush()
