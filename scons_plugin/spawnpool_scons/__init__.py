"""SCons integration of spawnpool: ``scons --process-spawner``.

`enable()` adds ``--process-spawner`` and the build-feature options (spawnpool.options,
spelled ``--process-spawner-NAME``) and routes the posix SPAWN and PSPAWN of every
construction Environment through one spawnpool session (spawnpool.stack: the layers the
options ask for, on a `spawnpool.Pool` whose slot count follows ``-j``).  Everything
else lives in the spawnpool package; this module only maps SCons' hooks onto it.
Without the option SCons behaves exactly as stock.

Hooks, found by feature (the same from SCons 4.0 to today's master):
- `SCons.Platform.posix.exec_subprocess` / `exec_popen3`, which the stock SPAWN / PSPAWN
  look up as module globals at call time: replacing them reaches every Environment,
  including ones made before the option value was known, and leaves a user's own
  env['SPAWN'] alone.  Whether the option is on is decided at the first spawn (its value
  is final only once SCons has parsed the whole command line).
- `Jobs._setup_sig_handler` (`SCons.Taskmaster.Job` since 4.5, `SCons.Job` before), which
  both task schedulers (legacy, and NewParallel, the default since 4.7) run at build
  start: SCons' SIGINT/SIGTERM/SIGHUP handlers are chained to the session's interrupt
  (spawnpool.interrupts).  `SConsValues.set_option`: SetOption('num_jobs', N) resizes
  the pool at the next spawn, once no command runs.
An SCons without one of them: one warning if the pool was asked for, stock spawning.

Errors: a command that runs and fails is returned as stock does (exit code, -N for a
signal).  One that never started raises what stock Popen raises where stock would (exec
failed, E2BIG); otherwise one line names the problem and SCons reports "Error 2".  If the
pool cannot start, one warning, then stock spawning (or subprocess.Popen under the
feature options asked for).  SPAWNPOOL_SCONS_DEBUG=1 prints when pools start and close.

Threading: the spawn functions run concurrently in SCons' job threads; `_lock` guards
starting and replacing the pool; the session's layers are thread-safe.
"""

import atexit
import errno
import importlib
import os
import signal
import threading

__all__ = ['enable', 'OPTION', 'generate', 'exists', 'find_hooks']

OPTION = '--process-spawner'
_DEST = 'process_spawner'
_PREFIX = 'process-spawner-'        # --process-spawner-output ... (spawnpool.options)
_HELP = ('Run build commands through a pool of spawner processes (spawnpool); '
         'slots follow -j.')
# Set on SCons' own module, so that two copies of this module (one in ~/.scons/site_scons,
# one vendored in a project) never patch twice.
_MARK = '_spawnpool_scons_patched'

# --- state shared by the job threads; `_lock` guards what changes after enable() ------
_lock = threading.Lock()
_session = None             # spawnpool.stack.Session, once the first command started it
_pool = None                # the live spawnpool.Pool, or None
_slots = 0                  # slots of _pool
_pool_failed = False        # the pool could not start: the session runs on Popen
_inflight = 0               # commands running (a resize waits for 0)
_stale = True               # start or resize the pool at the next spawn
_decided = None             # None: the option's value may still change; then True/False
_given_up = False           # stock spawning for good
_exit_registered = False

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
    """Until enable() finds the package: its console_message() stands in after that."""
    os.write(fd, text.encode(errors='replace'))


def enable():
    """Add ``--process-spawner`` and hook SCons' spawning.  Idempotent.

    Call it from a ``site_init.py`` (or any time before the build starts); calling it
    from both ``~/.scons/site_scons`` and a project's ``site_scons`` is fine.
    """
    global _enabled, _debug, _posix, _parser, _top_dir
    if _enabled:
        return
    import SCons.Script.Main as scons_main
    _enabled = True
    _debug = bool(os.environ.get('SPAWNPOOL_SCONS_DEBUG'))
    _parser = lambda: scons_main.OptionsParser  # noqa: E731
    _top_dir = os.getcwd()
    options = _import('spawnpool.options')
    _add_options(scons_main, options)
    hooks = find_hooks()
    if hooks is None:
        if _option_on() and not getattr(scons_main, _MARK, False):
            setattr(scons_main, _MARK, True)
            import SCons
            _warn('%s: not supported by this SCons (%s: no posix exec_subprocess, '
                  'Jobs._setup_sig_handler or SConsValues.set_option); using the default '
                  'spawner.' % (OPTION, getattr(SCons, '__version__', '?')))
        return
    _posix, jobs, values = hooks
    if getattr(_posix, _MARK, False):
        return
    setattr(_posix, _MARK, True)
    _install(jobs, values, options is not None)


def find_hooks():
    """(SCons.Platform.posix, the Jobs class, SConsValues) as this SCons has them, or None
    when one is missing (an SCons of unknown shape)."""
    try:
        import SCons.Platform.posix as posix
        from SCons.Script.SConsOptions import SConsValues
    except ImportError:
        return None
    for name in ('SCons.Taskmaster.Job', 'SCons.Job'):
        jobs = getattr(_import(name), 'Jobs', None)
        if callable(getattr(jobs, '_setup_sig_handler', None)):
            break
    else:
        return None
    if not all(callable(getattr(posix, f, None)) for f in ('exec_subprocess', 'exec_popen3')) \
            or not callable(getattr(SConsValues, 'set_option', None)):
        return None
    return posix, jobs, SConsValues


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


def _add_options(scons_main, options):
    has_option = getattr(scons_main.OptionsParser, 'has_option', None)
    if options is not None:
        options.add_to_scons(scons_main.AddOption, has_option, _PREFIX)
    if has_option is None or not has_option(OPTION):     # AddOption twice fails
        scons_main.AddOption(OPTION, dest=_DEST, action='store_true', default=False,
                             help=_HELP)


def _install(jobs, values, have_package):
    global _stock_exec_subprocess, _stock_exec_popen3, _jobserver, _watch, _Command, _console
    _stock_exec_subprocess, _stock_exec_popen3 = _posix.exec_subprocess, _posix.exec_popen3
    _posix.exec_subprocess, _posix.exec_popen3 = _pool_exec_subprocess, _pool_exec_popen3
    _wrap(values, 'set_option', _after_set_option)
    _wrap(jobs, '_setup_sig_handler', _after_setup_sig_handler)
    if have_package:
        from spawnpool import Command
        from spawnpool.interrupts import SignalWatch
        from spawnpool.output_sync import console_message
        _Command, _watch, _console = Command, SignalWatch(), console_message
        if 'jobserver-' in os.environ.get('MAKEFLAGS', ''):
            from spawnpool.jobserver import JobserverClient
            _jobserver = JobserverClient.from_environ()


def _wrap(owner, name, after):
    stock = getattr(owner, name)

    def hooked(self, *args):
        result = stock(self, *args)
        after(*args)
        return result
    hooked.__wrapped__ = stock
    setattr(owner, name, hooked)


def _uninstall():
    """Put the stock functions back: no per-command cost when the pool is not used."""
    if _posix.exec_subprocess is _pool_exec_subprocess:
        _posix.exec_subprocess = _stock_exec_subprocess
    if _posix.exec_popen3 is _pool_exec_popen3:
        _posix.exec_popen3 = _stock_exec_popen3


def _after_set_option(name, value):
    global _stale
    if name == 'num_jobs':
        _stale = True


def _after_setup_sig_handler():
    # Main thread, at build start, right after SCons installed its handlers.
    if not _option_on() or _watch is None:
        return
    from spawnpool.interrupts import STOP_SIGNALS, chain
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            signal.signal(signum, chain(handler, _interrupt))
    settings = _session.settings if _session is not None else _settings()
    if settings.wants_gate or _jobserver is not None and settings.jobserver:
        _watch.start()      # the gate looks for a stop signal before each start


def _interrupt(signum):
    # Python runs handlers in the main thread: under -j1 (Serial, or NewParallel with one
    # worker) inside Pool.run(), which runs them while it waits.
    session = _session
    if session is not None:
        try:
            session.interrupt(signum)
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
                                '--' + _PREFIX, _top_dir)


def _pool_options():
    if _session is not None:
        return _session.settings.pool_options()
    return _settings().pool_options() if _Command is not None else {}


def _num_jobs():
    try:
        return max(1, int(_parser().values.num_jobs))
    except (AttributeError, TypeError, ValueError):
        return 1


# --- the session's lifetime ---------------------------------------------------------

def _checkout():
    """The session to run one command in (counted as in flight), or None for stock."""
    global _inflight
    with _lock:
        if _stale and not _refresh_locked():
            return None
        _inflight += 1
        return _session


def _checkin():
    global _inflight
    with _lock:
        _inflight -= 1


def _refresh_locked():
    """Start the pool (and the session), or resize it after SetOption('num_jobs');
    False: stock spawning.  `_lock` is held."""
    global _stale, _pool, _slots, _pool_failed, _session
    if _given_up or not _option_on():
        if _decided is False:
            _give_up()
        return False
    slots = _num_jobs()
    if _session is not None and (_pool_failed or slots == _slots or _inflight):
        _stale = bool(_inflight) and not _pool_failed and slots != _slots
        return True             # never pull a pool from under a running command
    if _pool is not None:
        old, _pool = _pool, None
        _close(old)
    try:
        import spawnpool
        pool = spawnpool.Pool(slots=slots, **_pool_options())
    except Exception as e:
        pool, problem = None, e
    if _session is None:
        try:
            from spawnpool.stack import Session
            _session = Session(_settings(), slots, _warn, _jobserver, _watch,
                               process_name='scons')
        except Exception as e:      # spawnpool's Python half is missing or broken
            if pool is not None:
                _close(pool)
                pool, problem = None, e
    if pool is None:
        _warn('%s: could not start the process pool (%s); using the default spawner.'
              % (OPTION, _describe(problem)))
        if _session is None or not _session.any_layer:
            _give_up()
            return False
        from spawnpool import PopenRunner
        pool, _pool_failed = PopenRunner(), True
    if _session.base is None:
        _session.start(pool)
    else:
        _session.rebase(pool)
    if not _pool_failed:
        _pool, _slots = pool, slots
        if _debug:
            _console('scons: spawnpool: pool started with %d slots\n' % slots)
    _stale = False
    _at_exit()
    return True


def _give_up():
    global _given_up
    _given_up = True
    _uninstall()


def _close(pool):
    try:
        pool.close()
    except Exception as e:
        _warn('%s: closing the process pool failed (%s)' % (OPTION, _describe(e)))
    if _debug:
        _console('scons: spawnpool: pool closed\n')


def _at_exit():
    global _exit_registered
    if not _exit_registered:
        _exit_registered = True
        atexit.register(_finish)


def _finish():
    """At exit: close the pool, then the session; print the statistics (after SCons'
    last line) and, with a launcher and without -s, what it did."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        _close(pool)
    session = _session
    session.finish()
    if session.stats is not None:
        _console(session.stats.report(prefix='scons: spawnpool'), fd=1)
    gate = session.gate
    if gate is not None and gate.launcher is not None and not getattr(
            _parser().values, 'silent', False):
        _console('scons: ' + '\nscons: '.join(gate.summary()) + '\n', fd=1)
    if _debug and gate is not None and gate.jobserver is not None:
        _console('scons: spawnpool: jobserver: at most %d commands ran at once\n'
                 % gate.jobserver.max_running)


# --- the per-command path (keep it lean: it runs for every command of the build) --------

def _pool_exec_subprocess(l, env):
    """Replaces posix.exec_subprocess: run [sh, '-c', cmdline], output to the console."""
    session = _checkout()
    if session is None:
        return _stock_exec_subprocess(l, env)
    command = _Command(l, env)
    try:
        result = session.runner.run(command)
    finally:
        _checkin()
    if result.failure is None:
        return result.returncode
    return _not_started(command, result, None)


def _pool_exec_popen3(l, env, stdout, stderr):
    """Replaces posix.exec_popen3 (PSPAWN; Configure passes its config.log stream)."""
    session = _checkout()
    if session is None:
        return _stock_exec_popen3(l, env, stdout, stderr)
    # One stream for both (Configure's log): merge in the spawner, so that the
    # interleaving is the one the command produced, as with a shared fd.
    merge = stdout is stderr
    output = ('passthrough' if stdout is None and stderr is None
              else 'capture_merged' if merge else 'capture')
    command = _Command(l, env, None, output)
    try:
        result = session.checks_runner.run(command)
    finally:
        _checkin()
    if result.failure is not None:
        return _not_started(command, result, stderr)
    if output != 'passthrough':
        _deliver(result.stdout, stdout, 1)
        if not merge:
            _deliver(result.stderr, stderr, 2)
    return result.returncode


def _deliver(data, stream, default_fd):
    """Write captured bytes where stock Popen(stdout=stream) would have had them go."""
    if not data:
        return
    if stream is None:
        fd = default_fd
    elif isinstance(stream, int):
        if stream < 0:          # subprocess.DEVNULL (or PIPE, which nobody reads)
            return
        fd = stream
    else:
        try:
            # Stock hands stream.fileno() to the child: the bytes land after whatever
            # the stream had flushed, so flush first and bypass its buffer.
            stream.flush()
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            encoding = getattr(stream, 'encoding', None) or 'utf-8'
            stream.write(data.decode(encoding, 'replace'))
            return
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _not_started(command, result, log):
    """A command that never started.  Where stock Popen would have raised (exec failed,
    or the arguments are too big for exec) raise the same OSError: SCons prints it as
    stock does ("scons: *** [target] sh: No such file or directory").  Otherwise (the
    spawner died, ...) print one line saying what happened (also into config.log) and
    return a status that SCons reports as "Error 2"."""
    if result.failure == 'exec' or (result.failure == 'request'
                                    and result.error_number == errno.E2BIG):
        from spawnpool import spawn_error
        raise spawn_error(command, result)
    line = command.argv[-1] if command.argv else ''
    if len(line) > 200:
        line = line[:197] + '...'
    text = 'scons: *** %s: %s; command: %s\n' % (OPTION, _describe(result), line)
    if log is not None and not isinstance(log, int):
        try:
            log.write(text)
        except Exception:
            pass
    _console(text)
    return 2


def _describe(problem):
    """A failed Result or an exception, in a few words."""
    stage = getattr(problem, 'failure', None)
    if stage is not None:
        if stage == 'spawner_died':
            return problem.error_message
        return '%s (stage %s)' % (problem.error_message, stage)
    return getattr(problem, 'strerror', None) or str(problem) or problem.__class__.__name__


def _warn(text):
    _console('scons: warning: %s\n' % text)
