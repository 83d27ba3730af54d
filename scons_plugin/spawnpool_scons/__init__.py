"""SCons integration of spawnpool: ``scons --process-spawner``.

`enable()` adds the ``--process-spawner`` option and routes the posix SPAWN and PSPAWN of
every construction Environment through one `spawnpool.Pool` whose slot count follows
``-j``.  Without the option SCons behaves exactly as stock.

Threading: the spawn functions run concurrently in SCons' job threads.  Creating or
replacing the pool is serialised by `_lock`; `Pool.run()` itself is thread-safe and
releases the GIL while the command runs.

How it hooks in (SCons 4.x, posix):
- `SCons.Platform.posix.subprocess_spawn` / `piped_env_spawn` (the stock SPAWN / PSPAWN)
  look up `exec_subprocess` / `exec_popen3` as module globals at call time.  Replacing
  those two globals reaches every Environment, including the DefaultEnvironment and ones
  created before the option value was known, and leaves a user's own env['SPAWN'] alone.
- Whether the option is on is decided at the first spawn (its value may not be final
  when site_init.py runs: SCons re-parses the command line after reading SConscripts).
- `SetOption('num_jobs', N)` marks the pool for a resize at the next spawn.
- `Jobs._setup_sig_handler` (`SCons.Taskmaster.Job` since 4.5, `SCons.Job` before; found
  by `jobs_class()`) is wrapped so that SIGTERM/SIGHUP sent to SCons
  alone also cancel the running commands (they run in their own process groups).
  Ctrl-C needs nothing here: the spawners share SCons' process group and pass SIGINT on.
- The build-feature options (output sync, trace, stats, direct exec) are build_features.py:
  when any is in effect, each command goes through its `spawnpool.ShellRunner`.
- The distributed-build options (compiler launcher, local slots) and make's jobserver
  are distributed.py: when any is in effect, SPAWN commands go through its gate.

Errors: a command that runs and fails is returned as stock does (exit code, -N for a
signal).  One that cannot start raises what stock Popen raises where stock would (exec
failed, E2BIG), otherwise one line names the problem and SCons reports "Error 2".  If the
pool cannot start at all, one warning, then stock spawning.  SPAWNPOOL_SCONS_DEBUG=1
prints when pools start and close.
"""

import atexit
import errno
import os
import signal
import sys
import threading

from . import build_features
from . import distributed

__all__ = ['enable', 'OPTION', 'generate', 'exists']

OPTION = '--process-spawner'
_DEST = 'process_spawner'
_HELP = ('Run build commands through a pool of spawner processes (spawnpool); '
         'slots follow -j.')

# Marker attributes set on SCons' own objects, so that two copies of this module (say one
# from ~/.scons/site_scons and one vendored in a project) never patch twice.
_MARK = '_spawnpool_scons_patched'

# --- state shared by the job threads --------------------------------------------------
_lock = threading.Lock()    # guards everything below that changes after enable()
_pool = None                # the live spawnpool.Pool, or None before the first spawn
_pool_slots = 0             # slots of _pool
_inflight = 0               # commands running on _pool (a resize waits for 0)
_resize_wanted = False      # num_jobs was set since _pool was created
_decided = None             # None: option value may still change; True/False: final
_given_up = False           # the pool could not start: stock spawning for good
_atexit_registered = False
_runner = None              # spawnpool.ShellRunner for the build-feature options, or None
_runner_made = False        # _runner was decided (at the first pool start)

# --- set once by enable() -------------------------------------------------------------
_enabled = False
_debug = False
_posix = None               # SCons.Platform.posix
_options_parser = None      # getter for SCons.Script.Main.OptionsParser (replaced by main())
_stock_exec_subprocess = None
_stock_exec_popen3 = None
_spawnpool = None           # the spawnpool module, imported at the first pool start
_SpawnError = ()            # spawnpool.SpawnError once imported (empty tuple: matches none)
_SpawnerDied = ()
_getcwd = os.getcwd
_E2BIG = errno.E2BIG
_write = os.write


def enable():
    """Add ``--process-spawner`` and hook SCons' spawning.  Idempotent.

    Call it from a ``site_init.py`` (or any time before the build starts).  Calling it
    from both ``~/.scons/site_scons`` and a project's ``site_scons`` is fine.
    """
    global _enabled, _debug, _posix, _stock_exec_subprocess, _stock_exec_popen3
    if _enabled:
        return
    import SCons.Platform.posix as posix
    import SCons.Script.Main as scons_main
    import SCons.Script.SConsOptions as scons_options

    _debug = bool(os.environ.get('SPAWNPOOL_SCONS_DEBUG'))
    _posix = posix
    _add_option(scons_main)
    _enabled = True
    if getattr(posix, _MARK, False):
        return
    if not (callable(getattr(posix, 'exec_subprocess', None))
            and callable(getattr(posix, 'exec_popen3', None))):
        # An SCons whose posix spawn functions are shaped differently: accept the option,
        # build as stock, and say so (rather than break every build of the user).
        if _option_on():
            _console('scons: warning: %s: not supported by this SCons version (%s); '
                     'it has no effect.\n' % (OPTION, getattr(SCons, '__version__', '?')))
        return
    _stock_exec_subprocess = posix.exec_subprocess
    _stock_exec_popen3 = posix.exec_popen3
    _install()
    setattr(posix, _MARK, True)
    _hook_set_option(scons_options.SConsValues)
    jobs = jobs_class()
    if jobs is not None:
        _hook_signals(jobs)


def jobs_class():
    """SCons' `Jobs` class (whose `_setup_sig_handler` sets the interrupt handlers), or
    None.  Found by feature: `SCons.Taskmaster.Job` since 4.5, `SCons.Job` before."""
    import importlib
    for name in ('SCons.Taskmaster.Job', 'SCons.Job'):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        jobs = getattr(module, 'Jobs', None)
        if callable(getattr(jobs, '_setup_sig_handler', None)):
            return jobs
    return None


# SCons tool-module interface, so env.Tool('spawnpool_scons', toolpath=[...]) works too.
def generate(env):
    enable()


def exists(env):
    return True


def _add_option(scons_main):
    global _options_parser
    # main() replaces OptionsParser after import: always look it up through the module.
    _options_parser = lambda: scons_main.OptionsParser  # noqa: E731
    parser = scons_main.OptionsParser
    has_option = getattr(parser, 'has_option', None)
    build_features.add_options(scons_main.AddOption, has_option)
    distributed.setup(scons_main.AddOption, has_option, _option_on)
    if has_option is not None and has_option(OPTION):
        return                  # added by another copy of this module: AddOption twice fails
    scons_main.AddOption(OPTION, dest=_DEST, action='store_true', default=False,
                         help=_HELP)


def _install():
    _posix.exec_subprocess = _pool_exec_subprocess
    _posix.exec_popen3 = _pool_exec_popen3


def _uninstall():
    """Put the stock functions back: no per-command cost when the pool is not used."""
    if _posix.exec_subprocess is _pool_exec_subprocess:
        _posix.exec_subprocess = _stock_exec_subprocess
    if _posix.exec_popen3 is _pool_exec_popen3:
        _posix.exec_popen3 = _stock_exec_popen3


def _hook_set_option(values_class):
    stock_set_option = values_class.set_option

    def set_option(self, name, value):
        global _resize_wanted
        result = stock_set_option(self, name, value)
        if name == 'num_jobs':
            _resize_wanted = True
        return result

    set_option.__wrapped__ = stock_set_option
    values_class.set_option = set_option


def _hook_signals(jobs_class):
    stock_setup = jobs_class._setup_sig_handler

    def _setup_sig_handler(self):
        stock_setup(self)
        if not _option_on():
            return
        for signum in (signal.SIGTERM, signal.SIGHUP):
            handler = signal.getsignal(signum)
            if callable(handler):
                signal.signal(signum, _chain_cancel(handler))

    _setup_sig_handler.__wrapped__ = stock_setup
    jobs_class._setup_sig_handler = _setup_sig_handler


def _chain_cancel(scons_handler):
    # Python runs signal handlers in the main thread.  Under -j1 that thread is the one
    # running the command: Pool.run() checks for signals while it waits, so cancel() is
    # called from inside run() there (tests/scons/test_interrupts.py covers both).
    def handler(signum, frame):
        pool = _pool
        if pool is not None:
            try:
                pool.cancel(signum)
            except Exception:  # a dead pool must not stop SCons' own handler
                pass
        scons_handler(signum, frame)
    return handler


# --- deciding whether the option is on --------------------------------------------------

def _option_on():
    """The option's value; cached once SCons has parsed the full command line."""
    global _decided
    if _decided is not None:
        return _decided
    parser = _options_parser() if _options_parser else None
    value = bool(getattr(getattr(parser, 'values', None), _DEST, False))
    # While SCons reads the SConscripts it keeps options it does not know yet for a
    # final parse before building (preserve_unknown_options).  SCons 4.4 re-parses at
    # AddOption() already, but only that final parse makes a False certain; True never
    # reverts.
    if value or not getattr(parser, 'preserve_unknown_options', False):
        _decided = value
    return value


# --- pool lifetime -------------------------------------------------------------------

def _checkout():
    """The pool to run one command on (counted as in flight), or None for stock."""
    global _inflight
    with _lock:
        pool = _pool
        if pool is None or _resize_wanted:
            pool = _refresh_pool_locked()
            if pool is None:
                return None
        _inflight += 1
        return pool


def _checkin():
    global _inflight
    with _lock:
        _inflight -= 1


def _refresh_pool_locked():
    """Create the pool, or resize it after SetOption('num_jobs'); `_lock` is held."""
    global _pool, _pool_slots, _resize_wanted, _given_up
    if _given_up:
        return None
    if not _option_on():
        if _decided is False:
            _uninstall()
        return None
    slots = _num_jobs()
    _resize_wanted = False
    if _pool is not None:
        if slots == _pool_slots:
            return _pool
        if _inflight:           # never pull a pool from under a running command
            _resize_wanted = True
            return _pool
        old, _pool = _pool, None
        _close(old)
    try:
        _import_spawnpool()
        pool = _spawnpool.Pool(slots=slots)
    except Exception as e:
        _given_up = True
        _uninstall()
        _console('scons: warning: %s: could not start the process pool (%s); '
                 'using the default spawner.\n' % (OPTION, _describe(e)))
        return None
    _pool, _pool_slots = pool, slots
    _start_features(slots)
    distributed.start(_options_parser().values, slots)
    _register_atexit()
    if _debug:
        _console('scons: spawnpool: pool started with %d slots\n' % slots)
    return pool


def _start_features(slots):
    """Build the runner for the feature options once; later pools only resize it."""
    global _runner, _runner_made
    if not _runner_made:
        _runner_made = True
        _runner = build_features.runner(_options_parser().values, _spawnpool, slots)
    elif _runner is not None and _runner.stats is not None:
        _runner.stats.note_slots(slots)


def _num_jobs():
    parser = _options_parser() if _options_parser else None
    try:
        return max(1, int(parser.values.num_jobs))
    except (AttributeError, TypeError, ValueError):
        return 1


def _import_spawnpool():
    global _spawnpool, _SpawnError, _SpawnerDied
    if _spawnpool is None:
        import spawnpool
        _SpawnError = spawnpool.SpawnError
        _SpawnerDied = spawnpool.SpawnerDied
        _spawnpool = spawnpool


def _close(pool):
    try:
        pool.close()
    except Exception as e:
        _console('scons: warning: %s: closing the process pool failed (%s)\n'
                 % (OPTION, _describe(e)))
    if _debug:
        _console('scons: spawnpool: pool closed\n')


def _register_atexit():
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_close_at_exit)
        _atexit_registered = True


def _close_at_exit():
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        _close(pool)
    if _runner is not None:
        build_features.finish(_runner)


# --- the per-command path (keep it lean: it runs for every command of the build) --------

def _pool_exec_subprocess(l, env):
    """Replaces posix.exec_subprocess: run [sh, '-c', cmdline], output to the console."""
    pool = _checkout()
    if pool is None:
        return _stock_exec_subprocess(l, env)
    try:
        gate = distributed.gate
        if gate is not None:    # launcher, local slots, make jobserver: distributed.py
            return gate.run(pool, l, env, _getcwd(), _runner)
        runner = _runner
        if runner is not None:
            return runner.run(pool, l, env, _getcwd())
        return pool.run(l, env=env, cwd=_getcwd()).returncode
    except _SpawnError as e:
        return _report(e, l, None)
    finally:
        _checkin()


def _pool_exec_popen3(l, env, stdout, stderr):
    """Replaces posix.exec_popen3 (PSPAWN; Configure passes its config.log stream)."""
    pool = _checkout()
    if pool is None:
        return _stock_exec_popen3(l, env, stdout, stderr)
    try:
        runner = _runner
        if stdout is None and stderr is None:
            if runner is not None:
                return runner.run(pool, l, env, _getcwd())
            return pool.run(l, env=env, cwd=_getcwd()).returncode
        # One stream for both (Configure's log): merge in the spawner so that the
        # interleaving is the one the command produced, as with a shared fd.
        merge = stdout is stderr
        r = pool.run(l, env=env, cwd=_getcwd(), capture=True, merge_stderr=merge)
    except _SpawnError as e:
        return _report(e, l, stderr)
    finally:
        _checkin()
    if runner is not None:
        build_features.record(runner, r, r.returncode, l)
    _deliver(r.stdout, stdout, 1)
    if not merge:
        _deliver(r.stderr, stderr, 2)
    return r.returncode


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
        view = view[_write(fd, view):]


def _report(e, argv, log):
    """Handle a command that could not be run on the pool (no traceback either way).

    Where stock Popen would have raised (exec failed, or the arguments are too big for
    exec) raise the same OSError: SCons prints it as stock does ("scons: *** [target]
    sh: No such file or directory").  Otherwise (the spawner died, ...) print one line
    saying what happened and return a status that SCons reports as "Error 2".
    """
    errno_ = getattr(e, 'errno', None)
    stage = getattr(e, 'stage', None)
    if errno_ and not isinstance(e, _SpawnerDied) and (
            stage == 'exec' or (stage == 'request' and errno_ == _E2BIG)):
        raise OSError(errno_, os.strerror(errno_), argv[0]) from None
    cmd = argv[-1] if argv else ''
    if len(cmd) > 200:
        cmd = cmd[:197] + '...'
    line = 'scons: *** %s: %s; command: %s\n' % (OPTION, _describe(e), cmd)
    if log is not None and not isinstance(log, int):
        try:
            log.write(line)
        except Exception:
            pass
    _console(line)
    return 2


def _console(text):
    # Configure checks point sys.stderr at config.log; these lines are for the user.
    err = sys.__stderr__ or sys.stderr
    err.write(text)
    err.flush()


def _describe(e):
    stage = getattr(e, 'stage', None)
    text = getattr(e, 'strerror', None) or str(e) or e.__class__.__name__
    if isinstance(e, _SpawnerDied) or not stage:
        return text
    return '%s (stage %s)' % (text, stage)
