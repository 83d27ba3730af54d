"""Distributed builds with ``scons --process-spawner``: launcher, local slots, jobserver.

    --process-spawner-launcher=PROGRAM   run compiles as PROGRAM <compile> (distcc, ccache,
                                         icecc, "ccache distcc", ...)
    --process-spawner-compilers=LIST     compiler names besides cc,gcc,g++,c++,clang,clang++
    --process-spawner-local=N            at most N local commands at once (default with a
                                         launcher: the CPUs this process may use)
    --process-spawner-jobserver=yes|no   share the job slots of a make jobserver found in
                                         MAKEFLAGS (default yes)

`start()` turns the values into one `spawnpool.gate.CommandGate` (module global `gate`)
when the pool starts; the plugin's SPAWN path hands each command to it when it is not
None (one attribute check otherwise).  Configure checks (PSPAWN) do not go through it:
SCons runs them one at a time while it reads the SConscripts, before any build command,
so one check holds at most the implicit job slot and one local slot anyway.

The jobserver is looked for at `setup()`, when SCons has just started: make passes its
pipe as inherited fds, and later SCons may open files that take those numbers.

Threading: setup() and start() run with SCons' or the plugin's lock held; the gate is
thread-safe.  See docs/distributed.md.
"""

import atexit
import os
import signal
import sys

__all__ = ['setup', 'start', 'gate']

_LAUNCHER = ('--process-spawner-launcher', 'process_spawner_launcher')
_COMPILERS = ('--process-spawner-compilers', 'process_spawner_compilers')
_LOCAL = ('--process-spawner-local', 'process_spawner_local')
_JOBSERVER = ('--process-spawner-jobserver', 'process_spawner_jobserver')

_HOOK_MARK = '_spawnpool_distributed_hooked'

gate = None                 # the CommandGate, or None: commands run as they are
_started = False
_jobserver = None           # JobserverClient probed at setup(), or None
_signal_fd = None           # read end of signal.set_wakeup_fd(), or None
_option_on = None           # the plugin's "is --process-spawner on" callable
_debug = False


def setup(add_option, has_option, option_on=None):
    """At enable(): add the options, look for a jobserver, hook SCons' signal set-up."""
    global _option_on, _debug, _jobserver
    specs = [
        (_LAUNCHER, dict(type='string', default=None, metavar='PROGRAM',
                         help='with --process-spawner: run C/C++ compiles through '
                              'PROGRAM (distcc, ccache, icecc, ...)')),
        (_COMPILERS, dict(type='string', default=None, metavar='LIST',
                          help='with --process-spawner-launcher: more compiler names, '
                               'comma-separated (icc,foo-gcc)')),
        (_LOCAL, dict(type='int', default=None, metavar='N',
                      help='with --process-spawner: at most N commands on this machine at '
                           'once (default with a launcher: number of CPUs)')),
        (_JOBSERVER, dict(type='choice', choices=['yes', 'no'], default='yes',
                          metavar='yes|no',
                          help='with --process-spawner: share the job slots of a make '
                               'jobserver in MAKEFLAGS (default: yes)')),
    ]
    for (flag, dest), kw in specs:
        if has_option is None or not has_option(flag):
            add_option(flag, dest=dest, **kw)
    _option_on = option_on
    _debug = bool(os.environ.get('SPAWNPOOL_SCONS_DEBUG'))
    if _jobserver is None and 'jobserver-' in os.environ.get('MAKEFLAGS', ''):
        try:
            from spawnpool.jobserver import JobserverClient
            _jobserver = JobserverClient.from_environ()
        except Exception:       # spawnpool missing: the pool start will say so
            _jobserver = None
    _hook_signals()


def start(values, num_jobs):
    """At the first pool start: build the gate for the option values (once)."""
    global gate, _started
    if _started:
        return gate
    _started = True
    from spawnpool.gate import CommandGate, LocalSlots
    from spawnpool.launcher import CompileClassifier, Launcher
    launcher = None
    command = (getattr(values, _LAUNCHER[1], None) or '').strip()
    if command:
        extra = (getattr(values, _COMPILERS[1], None) or '').split(',')
        try:
            launcher = Launcher(command, CompileClassifier(extra))
        except ValueError as e:
            _warn('%s=%s: %s; compiles run without it' % (_LAUNCHER[0], command, e))
        else:
            if not launcher.found:
                _warn('%s: %s is not on PATH' % (_LAUNCHER[0], launcher.name))
    local = getattr(values, _LOCAL[1], None)
    slots = None
    if local is not None and local < 1:
        _warn('%s=%d: must be at least 1; ignored' % (_LOCAL[0], local))
        local = None
    if local is None and launcher is not None:
        local = _cpus()
    if local is not None:
        slots = LocalSlots(local)
    jobserver = None
    if _jobserver is not None and getattr(values, _JOBSERVER[1], 'yes') != 'no':
        jobserver = _jobserver
        jobserver.keep_from_commands()
        if not jobserver.usable:
            _warn('--process-spawner: %s; running one command at a time%s' % (
                jobserver.problem, '. ' + jobserver.hint[0].upper() + jobserver.hint[1:]
                if jobserver.hint else ''))
        elif _debug:
            _console('scons: spawnpool: sharing the job slots of make\'s jobserver (%s)\n'
                     % (jobserver.auth,))
    if launcher is None and slots is None and jobserver is None:
        return None
    gate = CommandGate(launcher, slots, jobserver, prefix='spawnpool')
    if _signal_fd is not None:
        gate.watch_signals(_signal_fd)
    atexit.register(_finish, gate, bool(getattr(values, 'silent', False)))
    return gate


def _finish(the_gate, silent):
    """At exit (after the pool closed): hand make its tokens back; with a launcher and
    without -s, print what the launcher did."""
    the_gate.close()
    lines = the_gate.summary()
    if lines and the_gate.launcher is not None and not silent:
        out = sys.__stdout__ or sys.stdout
        out.write('scons: ' + '\nscons: '.join(lines) + '\n')
        out.flush()
    if _debug and the_gate.jobserver is not None:
        _console('scons: spawnpool: jobserver: at most %d commands ran at once\n'
                 % the_gate.jobserver.max_running)


def _hook_signals():
    """Chain SCons' SIGINT/SIGTERM/SIGHUP handlers so that commands waiting for a local
    slot or a jobserver token give up instead of starting after the interrupt (and a
    thread blocked on make's pipe does not keep SCons from finishing)."""
    from . import jobs_class as find_jobs_class
    jobs_class = find_jobs_class()
    if jobs_class is None or getattr(jobs_class, _HOOK_MARK, False):
        return
    stock_setup = jobs_class._setup_sig_handler

    def _setup_sig_handler(self):
        stock_setup(self)
        if _option_on is not None and not _option_on() or not _may_wait():
            return
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            handler = signal.getsignal(signum)
            if callable(handler):
                signal.signal(signum, _chain(handler))
        _watch_signals()

    _setup_sig_handler.__wrapped__ = stock_setup
    jobs_class._setup_sig_handler = _setup_sig_handler
    setattr(jobs_class, _HOOK_MARK, True)


def _may_wait():
    """Whether commands may wait for a slot in this build (gate options in effect)."""
    if gate is not None:
        return gate.jobserver is not None or gate.local_slots is not None
    if _started:
        return False
    import SCons.Script.Main
    values = getattr(SCons.Script.Main.OptionsParser, 'values', None)
    return bool(getattr(values, _LAUNCHER[1], None) or getattr(values, _LOCAL[1], None)
                or _jobserver is not None and getattr(values, _JOBSERVER[1], 'yes') != 'no')


def _watch_signals():
    """Have the interpreter write signal numbers to a pipe the gate checks (main thread
    only; left alone if something else in the process uses set_wakeup_fd)."""
    global _signal_fd
    if _signal_fd is not None:
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        old = None
    if old != -1:
        if old is not None:
            signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _signal_fd = r
    if gate is not None:
        gate.watch_signals(r)


def _chain(scons_handler):
    def handler(signum, frame):
        the_gate = gate
        if the_gate is not None:
            the_gate.interrupt(signum)
        scons_handler(signum, frame)
    return handler


def _cpus():
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _warn(text):
    _console('scons: warning: %s\n' % text)


def _console(text):
    err = sys.__stderr__ or sys.stderr
    err.write(text)
    err.flush()
