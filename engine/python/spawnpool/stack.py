"""The build-feature layers on a runner, in one order, and the session that owns them.

A layer is a runner (``run(command) -> Result``) on an inner runner.  The engine owns the
stack (engine/src/stack/session.h, bound as ``_spawnpool.Session``): it reads each
command once at its door and runs it through the layers a build's Settings ask for
(options.py), in this order:

    launcher      a compile gets the compiler launcher (and is not local)
    recorded      the trace and the statistics see every result, with the line that ran
                  (the engine's trace and stats layers; stats.py hands them the
                  statistics)
    sync          a passthrough command is captured and printed as one block when it ends
    direct exec   ``sh -c LINE`` without shell syntax runs as its program, with sh's
                  environment, messages and status
    base          the pool (pool.py: in C++ all the way down), or a Python runner
                  (PopenRunner, popen_runner.py; FakeRunner, testing.py), called back
                  with the GIL

Every layer is the engine's, so the stack is one C++ call per command.  Output sync
(sync_layer.h) prints through output_sync.py's console, a command's block before the
launcher's message about it; the trace and the statistics (trace_layer.h,
stats_layer.h) record the line that ran, below the launcher.  Without the compiled
module there is no engine's stack: the build runs on Popen without any layer, and a
launcher and output sync are warned about and left out (the trace and the statistics
need the module too).

The trace and the report are the engine's too (engine/src/stack/trace_recording.h): the
engine's Session opens the trace when it is made (here, before the pool), records it,
and in finish() writes the report (``report``) from it; with a report and no trace it
records into a temporary file of its own that no way the build ends leaves behind.  A
file that cannot be written is a warning, and the build goes on without it.  Whether the
build keeps its history (memory admission or the status line read it) is the engine's
decision too (spawnpool::history_path, session.h; Settings.history_path()).

Admission is no layer: the pool's scheduler grants each command its slot, local slot,
jobserver token and memory together (`pool_options()` hands it the jobserver and the
local slots), so no command holds a token while it waits for something else.

Why this order: the launcher rewrites the line before anything reads it; output sync
captures whatever direct exec adds (sh's "Segmentation fault"); direct exec sits on the
runner because only it knows a program could not start and the line needs sh after all.
A layer that is not asked for is not there: with the defaults a command crosses the
engine's direct exec alone, and output sync too while a status line is shown (the line
needs the output to come through it).

Threading: every layer is thread-safe (run() is called from many threads at once); the
session is built, started and finished by one thread.
"""

import os
import shlex
import signal
import sys

from .stats import Stats

__all__ = ['Session']


class _BelowLauncher:
    """The engine's stack below its launcher, as a runner (SCons' Configure checks)."""

    __slots__ = ('run', 'inner')

    def __init__(self, stack):
        self.run = stack.run_checks
        self.inner = stack


class Session:
    """One build's features: made from its Settings, once; `start(base)` stacks the layers
    on a runner, `rebase(base)` moves them onto another (a resized pool).

    `runner` runs a build command through every layer; `checks_runner` through those
    under the launcher (SCons' Configure checks, which the launcher leaves alone).
    `warn(text)` reports a problem that leaves the build going (an unwritable trace, a
    launcher not on PATH, an unusable jobserver); `jobserver` is the engine's client
    (jobserver.py) probed early, or None; `watch` an interrupts.SignalWatch, or None.
    The pool the session runs on is made with `pool_options()`.
    The engine's stack is made here, before its pool (start() puts it on one): it opens
    the trace, and for a report finish() writes it; `command_args` goes to the trace
    (called on each command's thread, with the GIL), and the build's command line is
    process_name's program and argv.
    """

    def __init__(self, settings, slots, warn, jobserver=None, watch=None,
                 process_name='spawnpool', prefix='spawnpool', command_args=None,
                 status_fd=1):
        self.settings = settings
        self._warn = warn
        settings.status_fd = status_fd
        self.stats = Stats(slots=slots) if settings.stats else None
        self.status = None
        status_mode = settings.status_mode(status_fd)
        self.history = self._open_history(settings, status_mode is not None, prefix, warn)
        if status_mode is not None:
            try:
                from .status import BuildStatus
                self.status = BuildStatus(status_mode, self.history, status_fd)
            except ImportError:     # no compiled module: the build runs on Popen, unseen
                self.status = None
        # The status line needs every output line whole: commands are captured and printed
        # through its printer (output_sync.py), as with --output=sync.
        later = []      # their warnings, said after the trace's
        self.sync = bool(self.status) or self._output_sync(settings, later.append)
        self.launcher = launcher = self._launcher(settings, later.append)
        # The engine's stack (_spawnpool.Session), or None: no layer asked for, or no
        # compiled module. Made now, before its pool, so that the trace's problems come
        # before the build.
        self._stack = self._make_stack(prefix, process_name, command_args)
        for text in later:
            warn(text)
        local = settings.local
        if local is not None and local < 1:
            warn('%s=%d: must be at least 1; ignored' % (settings.flag('local'), local))
            local = None
        if local is None and launcher is not None:
            local = _engine().default_local_slots(settings.launcher)
        if jobserver is not None and settings.jobserver:
            jobserver.keep_from_commands()
            if not jobserver.usable and jobserver.claim_warning():
                hint = jobserver.hint
                warn('%s: %s; running one command at a time%s' % (
                    settings.flag('jobserver'), jobserver.problem,
                    '. ' + hint[0].upper() + hint[1:] if hint else ''))
        else:
            jobserver = None
        self.jobserver = jobserver
        self.local_slots = local or 0
        self.watch = watch
        self.base = self.runner = self.checks_runner = None
        self.interrupted = False    # a stop signal came (interrupt())

    def pool_options(self, warning_prefix='spawnpool: warning: '):
        """Keyword arguments for Pool(): the settings' (memory, the same-CPU hand-off), the
        build's one history (opened once, shared by every pool of the build and its
        progress), the progress the status line shows, and what the pool needs for
        admission: make's jobserver, the local slots, and the signal watch's pipe (a stop
        signal seen there before its handler ran starts no more commands)."""
        options = self.settings.pool_options(warning_prefix)
        options.pop('history', None)
        if self.history is not None:
            options['history'] = self.history
        if self.status is not None:
            options['progress'] = self.status.progress
        watch = self.watch
        options.update(jobserver=self.jobserver, local_slots=self.local_slots,
                       stop_signal_fd=watch.fd if watch is not None else None)
        return options

    def start(self, base):
        """Put the layers on `base`; returns the runner for build commands."""
        stack = self._stack
        if stack is not None:
            stack.rebase(base)
        runner = stack if stack is not None else base
        self.checks_runner = runner
        if stack is not None and self.launcher is not None:
            self.checks_runner = _BelowLauncher(stack)
        self.base, self.runner = base, runner
        return runner

    def rebase(self, base):
        """Put the layers on another runner (no command may be running)."""
        if self._stack is not None:
            self._stack.rebase(base)
        else:
            self.runner = self.checks_runner = base
        self.base = base
        if self.stats is not None:
            self.stats.note_slots(getattr(base, 'slots', 0) or 0)

    def interrupt(self, signum):
        """The build was interrupted by `signum` (see interrupts.py): commands waiting to
        start come back with returncode -signum."""
        self.interrupted = True
        interrupt = getattr(self.base, 'interrupt', None)
        if interrupt is not None:
            interrupt(signum)
        cancel = getattr(self.base, 'cancel', None)
        if signum != signal.SIGINT and cancel is not None:
            cancel(signum)

    def finish(self):
        """At the end: the status line's summary, the engine's end of the build (the
        trace closed, the report written), make's tokens given back (idempotent)."""
        if self.status is not None:
            self.status.finish(self.interrupted)
        if self.history is not None:
            self.history.flush()    # the build's shape, recorded just now
        if self._stack is not None:
            self._stack.finish()
        if self.jobserver is not None:
            self.jobserver.return_all()

    @property
    def trace(self):
        """The engine's trace being recorded (a report's temporary one too), or None."""
        return self._stack.trace if self._stack is not None else None

    def report(self, stats_prefix, line_prefix='', summary=True):
        """The statistics (if asked for) and, with a launcher and `summary`, what the
        launcher did: text for the end of the build ('' if none)."""
        text = self.stats.report(prefix=stats_prefix) if self.stats is not None else ''
        stack = self._stack
        if summary and self.launcher is not None and stack is not None:
            text += line_prefix + stack.summary + '\n'
        return text

    @property
    def any_layer(self):
        """Whether anything but direct exec is asked for (direct exec is the default)."""
        return bool(self.trace is not None or self.stats or self.sync or self.launcher)

    def _make_stack(self, prefix, process_name, command_args):
        """The engine's stack, not yet on a base, when a layer is asked for."""
        settings = self.settings
        engine = _engine()
        if engine is None or not (settings.direct_exec or self.launcher is not None
                                  or self.sync or settings.trace or settings.report
                                  or self.stats is not None):
            return None
        line = ' '.join(shlex.quote(a) for a in process_name.split()[:1] + sys.argv[1:])
        trace, report = settings.trace, settings.report
        return engine.Session(
            None, self.launcher, direct_exec=settings.direct_exec, output_sync=self.sync,
            prefix=prefix, stats=self.stats._engine if self.stats is not None else None,
            command_args=command_args,
            trace_path=os.path.join(settings.base_dir, trace) if trace else None,
            report_path=os.path.join(settings.base_dir, report) if report else None,
            process_name=process_name, command_line=line,
            option_prefix=settings.flag_prefix, warn=self._warn)

    @staticmethod
    def _open_history(settings, status_shown, prefix, warn):
        """The build's history where the engine's decision keeps one (None: nothing reads
        it, it is off, or the compiled module is missing). Its problems (a read-only
        tree) are its one warning; the build goes on without it."""
        path = settings.history_path(status_shown, warn)
        if path is None:
            return None
        try:
            from ._spawnpool import History
        except ImportError:
            return None
        return History(path, settings.history_warning_prefix('%s: warning: ' % prefix))

    @staticmethod
    def _output_sync(settings, warn):
        if settings.output != 'sync':
            return False
        if _engine() is None:
            warn('%s=sync: needs spawnpool\'s compiled module; output is passed through' %
                 settings.flag('output'))
            return False
        return True

    @staticmethod
    def _launcher(settings, warn):
        command = (settings.launcher or '').strip()
        if not command:
            return None
        engine = _engine()
        if engine is None:
            warn('%s=%s: needs spawnpool\'s compiled module; compiles run without it' % (
                settings.flag('launcher'), command))
            return None
        try:
            launcher = engine.Launcher(command, engine.CompileClassifier(settings.compilers or ()))
        except ValueError as e:
            warn('%s=%s: %s; compiles run without it' % (settings.flag('launcher'), command, e))
            return None
        if not launcher.found:
            warn('%s: %s is not on PATH' % (settings.flag('launcher'), launcher.name))
        return launcher


def _engine():
    """The compiled module, or None where it does not load (the build then runs on
    Popen without the engine's layers)."""
    try:
        from .pool import _spawnpool
    except ImportError:
        return None
    return _spawnpool
