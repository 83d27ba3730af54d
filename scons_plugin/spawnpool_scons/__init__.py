"""SCons integration of spawnpool: ``scons --process-spawner``.

`enable()` adds ``--process-spawner`` and the build-feature options (spawnpool.options,
as ``--process-spawner-NAME``), and routes the posix SPAWN and PSPAWN of every
Environment through one spawnpool session (spawnpool.stack: the layers the options ask
for, on a Pool whose slots follow ``-j``).  This module only maps SCons onto the
package; without the option SCons behaves exactly as stock.  Its two hooks are found by
feature (`find_hooks`; README.md, "What changed between SCons versions"): the posix
exec_subprocess/exec_popen3, and Jobs._setup_sig_handler (in SCons.Taskmaster.Job since
4.5, SCons.Job before), which both schedulers run when a build or a Configure check
starts.  An SCons without them: one warning if the pool was asked for, stock spawning.

Errors: a command that ran is returned as stock does (exit code, -N for a signal); with
--process-spawner-memory, one the OOM killer killed even when run alone also gets a line
saying so ("scons: *** --process-spawner: killed by the kernel's OOM killer (peak N MiB,
budget M MiB); command: ...") before SCons reports its error.  One that never started
raises what Popen raises where Popen would (exec failed, E2BIG); otherwise one line says
why and SCons reports "Error 2".  A pool that cannot start: one
warning, then stock spawning (subprocess.Popen under the feature options asked for).
SPAWNPOOL_SCONS_DEBUG=1 prints when pools start and close.

Threading: the spawn functions run in SCons' job threads at once; `_lock` guards
starting and replacing the pool.  A resize is decided when a Jobs run starts (the
build's, or a Configure check's), before it starts any command: nothing runs then, and
SCons itself reads num_jobs there; the session's layers are thread-safe.
"""

import atexit
import importlib
import os
import signal
import threading

__all__ = ['enable', 'OPTION', 'generate', 'exists', 'find_hooks']

OPTION = '--process-spawner'
_DEST = 'process_spawner'
_PREFIX = 'process-spawner-'        # --process-spawner-output ... (spawnpool.options)
_HISTORY_DIR = '.spawnpool' + os.sep  # the memory history's home, at the top of the build
_HELP = ('Run build commands through a pool of spawner processes (spawnpool); '
         'slots follow -j.')
# Set on SCons' own modules, so that two copies of this module (~/.scons/site_scons and
# a project's) never patch, or warn, twice.
_MARK = '_spawnpool_scons_patched'

# --- state shared by the job threads; `_lock` guards what changes after enable() ------
_lock = threading.Lock()
_session = None             # spawnpool.stack.Session, made at the first command
_pool = None                # the live spawnpool.Pool, or None
_slots = 0                  # slots of _pool
_pool_failed = False        # the pool could not start: the session runs on Popen
_stale = True               # start or resize the pool at the next spawn
_decided = None             # None: the option's value may still change; then True/False
_given_up = False           # stock spawning for good
_exit_registered = False
_line_wanted = None         # None: not asked yet; then whether a status line is on
_task_commands = None       # progress.task_commands once the count follows the build

# --- set once by enable() ------------------------------------------------------------
_enabled = False
_debug = False
_posix = None               # SCons.Platform.posix
_parser = None              # () -> SCons.Script.Main.OptionsParser (main() replaces it)
_stock_exec_subprocess = _stock_exec_popen3 = None
_top_dir = None             # where a relative trace path starts (SCons applied -C/-u)
_jobserver = None           # make's jobserver, probed at enable() (fds may be reused)
_watch = None               # spawnpool.interrupts.SignalWatch
_Command = None             # spawnpool.Command


def _console(text, fd=2):
    """Until enable() finds the package: its console_message() after that."""
    os.write(fd, text.encode(errors='replace'))


def enable():
    """Add ``--process-spawner`` and hook SCons' spawning.  Idempotent.

    Call it from a ``site_init.py`` (or any time before the build starts); calling it
    from both ``~/.scons/site_scons`` and a project's ``site_scons`` is fine.
    """
    global _enabled, _debug, _posix, _parser, _top_dir, _task_commands
    if _enabled:
        return
    import SCons.Script.Main as scons_main
    _enabled = True
    _debug = bool(os.environ.get('SPAWNPOOL_SCONS_DEBUG'))
    _parser = lambda: scons_main.OptionsParser  # noqa: E731
    _top_dir = os.getcwd()
    options = _import('spawnpool.options')     # pure Python: no compiled code loads
    has_option = getattr(scons_main.OptionsParser, 'has_option', None)
    if options is not None:
        options.add_to_scons(scons_main.AddOption, has_option, _PREFIX)
    if has_option is None or not has_option(OPTION):     # AddOption twice fails
        scons_main.AddOption(OPTION, dest=_DEST, action='store_true', default=False,
                             help=_HELP)
    hooks = find_hooks()
    if hooks is None:
        if _option_on() and not getattr(scons_main, _MARK, False):
            setattr(scons_main, _MARK, True)
            import SCons
            _warn('%s: not supported by this SCons (%s: no posix exec_subprocess/'
                  'exec_popen3 or Jobs._setup_sig_handler); using the default spawner.'
                  % (OPTION, getattr(SCons, '__version__', '?')))
        return
    _posix, jobs = hooks
    if not getattr(_posix, _MARK, False):
        setattr(_posix, _MARK, True)
        _install(jobs, options is not None)
        build_task = find_build_task()
        if build_task is not None and options is not None:
            from . import progress
            progress.install(build_task, _status_session)
            _task_commands = progress.task_commands


def find_hooks():
    """(SCons.Platform.posix, the Jobs class) as this SCons has them, or None when one is
    missing (an SCons of unknown shape)."""
    posix = _import('SCons.Platform.posix')
    if not all(callable(getattr(posix, f, None)) for f in ('exec_subprocess', 'exec_popen3')):
        return None
    for name in ('SCons.Taskmaster.Job', 'SCons.Job'):
        jobs = getattr(_import(name), 'Jobs', None)
        if callable(getattr(jobs, '_setup_sig_handler', None)):
            return posix, jobs
    return None


def find_build_task():
    """SCons.Script.Main.BuildTask when it has the two methods the status line's count
    follows (make_ready: a node found up to date or to build; executed), else None (no
    count: the history's last build gives the total)."""
    task = getattr(_import('SCons.Script.Main'), 'BuildTask', None)
    if all(callable(getattr(task, name, None)) for name in ('make_ready', 'executed')):
        return task
    return None


def _status_session():
    """The session whose status line follows the build, or None (main thread or the
    Taskmaster's lock: see progress.py)."""
    global _line_wanted
    if not _option_on():
        return None
    values = getattr(_parser(), 'values', None)
    if any(getattr(values, name, False) for name in ('clean', 'no_exec', 'question', 'silent')):
        return None             # nothing runs, or nothing may be printed
    if _session is None:
        if _line_wanted is None:
            _line_wanted = _settings().status_mode() is not None
        if not _line_wanted:
            return None         # the pool starts at the first command, as without a line
    session = _session if not _stale else _checkout()
    return session if session is not None and session.status is not None else None


# SCons tool-module interface, so env.Tool('spawnpool_scons', toolpath=[...]) works too.
def generate(env):
    enable()


def exists(env):
    return True


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _install(jobs, have_package):
    global _stock_exec_subprocess, _stock_exec_popen3, _jobserver, _watch, _console, _Command
    _stock_exec_subprocess, _stock_exec_popen3 = _posix.exec_subprocess, _posix.exec_popen3
    _posix.exec_subprocess, _posix.exec_popen3 = _pool_exec_subprocess, _pool_exec_popen3
    _wrap(jobs, '_setup_sig_handler', _after_setup_sig_handler)
    if have_package:
        from spawnpool import Command, interrupts, jobserver, output_sync
        _Command, _console, _watch = Command, output_sync.console_message, \
            interrupts.SignalWatch()
        if 'jobserver-' in os.environ.get('MAKEFLAGS', ''):
            _jobserver = jobserver.from_environ()


def _wrap(owner, name, after):
    stock = getattr(owner, name)

    def hooked(self, *args):
        result = stock(self, *args)
        after(*args)
        return result
    hooked.__wrapped__ = stock
    setattr(owner, name, hooked)


def _after_setup_sig_handler():
    # Main thread, when a Jobs run starts, right after SCons installed its handlers.
    global _stale, _slots
    if not _option_on() or _watch is None:
        return
    if _pool is not None and _num_jobs() != _slots:
        _stale = True       # SetOption('num_jobs'), or --interactive's -j: resize first
    if _session is not None and _session.interrupted:
        # --interactive's next build after a Ctrl-C: the interrupted pool starts nothing
        # more (its scheduler's interrupt, the stop its spawners noted), so a new one,
        # and the last build's signal out of the watch's pipe.
        _session.interrupted = False
        _watch.drain()
        _stale, _slots = True, 0
    from spawnpool.interrupts import STOP_SIGNALS, chain
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            signal.signal(signum, chain(handler, _interrupt))
    settings = _session.settings if _session is not None else _settings()
    if settings.trace or settings.report:       # the report's critical path
        from spawnpool_scons import action_nodes
        action_nodes.install(_MARK)
    if settings.commands_may_wait(_jobserver):     # the pool looks at the watch's pipe
        watching = _watch.fd is not None
        _watch.start()
        if not watching and _watch.fd is not None and _pool is not None:
            # Made before it, for Configure checks: the next spawn makes one with its pipe.
            _stale, _slots = True, 0


def _interrupt(signum):
    # Handlers run in the main thread: under -j1 (Serial, or NewParallel with one worker)
    # inside Pool.run(), which runs them while it waits.
    if _session is not None:
        try:
            _session.interrupt(signum)
        except Exception:       # a dead pool must not stop SCons' own handler
            pass


def _option_on():
    """The option's value; cached once SCons has parsed the full command line."""
    global _decided
    if _decided is not None:
        return _decided
    parser = _parser() if _parser else None
    value = bool(getattr(getattr(parser, 'values', None), _DEST, False))
    # While SCons reads the SConscripts it keeps options it does not know yet for a final
    # parse (preserve_unknown_options); only that parse makes a False certain.
    if value or not getattr(parser, 'preserve_unknown_options', False):
        _decided = value
    return value


def _settings():
    from spawnpool.options import Settings
    return Settings.from_values(_parser().values, _PREFIX.replace('-', '_'),
                                '--' + _PREFIX, _top_dir, _HISTORY_DIR)


def _num_jobs():
    try:
        return max(1, int(_parser().values.num_jobs))
    except (AttributeError, TypeError, ValueError):
        return 1


# --- the session's lifetime ---------------------------------------------------------

def _checkout():
    """The session to run one command in, or None for stock."""
    with _lock:
        return _session if not _stale or _refresh_locked() else None


def _refresh_locked():
    """Start the pool and the session, or resize the pool after SetOption('num_jobs');
    False: stock spawning.  `_lock` is held."""
    global _stale, _pool, _slots, _pool_failed, _session, _exit_registered
    if _given_up or not _option_on():
        if _decided is False:
            _give_up()
        return False            # (still stale: the option may yet be parsed)
    slots = _num_jobs()
    if _session is not None and (_pool_failed or slots == _slots):
        _stale = False
        return True
    _pool = _close(_pool)
    try:
        import spawnpool
        if _session is None and _Command is not None:
            from spawnpool.stack import Session
            from spawnpool_scons.action_nodes import current
            _session = Session(_settings(), slots, _warn, _jobserver, _watch, 'scons',
                               command_args=current)
        options = _session.pool_options('scons: warning: ') if _session is not None else {}
        pool = _pool = spawnpool.Pool(slots=slots, **options)
        if _session is None:
            raise ImportError('spawnpool.options is missing')
        _slots = slots
        if _debug:
            _console('scons: spawnpool: pool started with %d slots\n' % slots)
    except Exception as e:      # spawnpool missing or broken, or the pool refused
        _pool = _close(_pool)
        _warn('%s: could not start the process pool (%s); using the default spawner.'
              % (OPTION, getattr(e, 'strerror', None) or e))
        if _session is None or not _session.any_layer:
            _give_up()
            return False
        pool, _pool_failed = spawnpool.PopenRunner(), True
    if _session.base is None:
        _session.start(pool)
    else:
        _session.rebase(pool)
    _stale = False              # last: job threads read it without the lock
    if not _exit_registered:
        _exit_registered = True
        atexit.register(_finish)
    return True


def _give_up():
    global _given_up
    _given_up = True
    if _posix.exec_subprocess is _pool_exec_subprocess:    # stock again: no cost
        _posix.exec_subprocess = _stock_exec_subprocess
    if _posix.exec_popen3 is _pool_exec_popen3:
        _posix.exec_popen3 = _stock_exec_popen3


def _close(pool):
    """Close `pool` (if any); returns None, for `_pool = _close(_pool)`."""
    if pool is not None:
        try:
            pool.close()
        except Exception as e:
            _warn('%s: closing the process pool failed (%s)' % (OPTION, e))
        if _debug:
            _console('scons: spawnpool: pool closed\n')


def _finish():
    """At exit: close the pool and the session; print the statistics and (with a
    launcher, without -s) what the launcher did, after SCons' last line."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    _close(pool)
    if _task_commands is not None:
        from . import progress
        progress.finish()           # the count's account, for the history
    _session.finish()
    silent = getattr(_parser().values, 'silent', False)
    _console(_session.report('scons: spawnpool', 'scons: ', summary=not silent), fd=1)
    jobserver = _session.jobserver
    if _debug and jobserver is not None:
        _console('scons: spawnpool: jobserver: at most %d commands ran at once\n'
                 % jobserver.max_running)


# --- the per-command path (keep it lean: it runs for every command of the build) --------

def _pool_exec_subprocess(l, env):
    """Replaces posix.exec_subprocess: run [sh, '-c', cmdline], output to the console."""
    session = _session if not _stale else _checkout()
    if session is None:
        return _stock_exec_subprocess(l, env)
    command = _Command(l, env)
    if _task_commands is not None:
        _task_commands.ran += 1     # the count's commands per unit (progress.py)
    result = session.runner.run(command)
    if result.failure is None:
        if result.oom_killed:
            _report(command, result.error_message, None)
        return result.returncode
    return _not_started(command, result, None)


def _pool_exec_popen3(l, env, stdout, stderr):
    """Replaces posix.exec_popen3 (PSPAWN; Configure passes its config.log stream).
    Configure checks skip the launcher: it and the local slots leave them alone."""
    session = _session if not _stale else _checkout()
    if session is None:
        return _stock_exec_popen3(l, env, stdout, stderr)
    from spawnpool import popen_style
    if _task_commands is not None:
        _task_commands.ran += 1
    result = popen_style.call(session.checks_runner, l, env, stdout, stderr)
    if result.failure is None:
        if result.oom_killed:
            _report(_Command(l, env), result.error_message, stderr)
        return result.returncode
    return _not_started(_Command(l, env), result, stderr)


def _not_started(command, result, log):
    """Where Popen would have raised (exec failed, E2BIG), raise the same OSError: SCons
    prints it as stock does ("scons: *** [target] sh: No such file or directory").
    Otherwise (the spawner died, ...) print one line saying why (also into config.log)
    and return a status that SCons reports as "Error 2"."""
    from spawnpool import popen_style, spawn_error
    if popen_style.popen_would_raise(result):
        raise spawn_error(command, result)
    _report(command, result.failure_text(), log)
    return 2


def _report(command, why, log):
    """One line saying why a command failed (also into config.log for a Configure check)."""
    line = command.argv[-1] if command.argv else ''
    text = 'scons: *** %s: %s; command: %s\n' % (
        OPTION, why, line if len(line) <= 200 else line[:197] + '...')
    if log is not None and not isinstance(log, int):
        try:
            log.write(text)
        except Exception:
            pass
    _console(text)


def _warn(text):
    _console('scons: warning: %s\n' % text)
