"""``spawnpool run``: one shell command per input line, through the pool (like xargs -P).

    spawnpool run -j 4 commands.txt
    generate-commands | spawnpool run -j 8 --output=sync --stats --report=run.html -
    spawnpool report build.trace.json -o report.html

(``spawnpool report`` writes the HTML build report of a trace, report.py; exit 1 with
one line saying why when it cannot.)

Each non-blank line runs as ``/bin/sh -c LINE`` (directly when it needs no shell, see
direct_exec.py), at most N at a time.  As make does, the first failure stops new commands
from starting (running ones finish); ``-k`` runs everything.  Each failure is reported as
``spawnpool: *** [line 3] Error 2: <command>`` (with ``--memory``, a command the OOM killer
killed even when run alone adds why: ``Error 1, killed by the kernel's OOM killer (peak N
MiB, budget M MiB)``).  Exit status: 0 when every command
succeeded, 1 when any failed, 2 for a usage error, 128+N when interrupted by signal N.
The build-feature options are those of ``scons --process-spawner`` (options.py).

Threads: one worker thread per slot takes the next line and runs it (the engine's stack
releases the GIL); the main thread only waits, so it is the one that sees Ctrl-C and
SIGTERM.
"""

import argparse
import os
import signal
import sys
import threading

from .command import Command
from .interrupts import STOP_SIGNALS, SignalWatch, chain
from . import jobserver as _jobserver
from .options import Settings, add_to_argparse
from .output_sync import console_message
from .stack import Session

__all__ = ['main']

SHELL = '/bin/sh'
_PROG = 'spawnpool'


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == 'run':
        return run_command(args)
    if args.command == 'report':
        return report_command(args)
    return 2


def _parser():
    parser = argparse.ArgumentParser(prog=_PROG, description='Run commands through a '
                                     'pool of pre-spawned spawner processes.')
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    run = sub.add_parser('run', help='run one shell command per line of FILE (like xargs -P)',
                         description=__doc__.split('\n\n')[0].split(': ', 1)[1])
    run.add_argument('file', nargs='?', default='-', metavar='FILE',
                     help='commands, one per line; - or none: standard input')
    run.add_argument('-j', '--jobs', type=_positive_int, default=os.cpu_count() or 1,
                     metavar='N', help='commands at once (default: one per CPU, %(default)s)')
    run.add_argument('-k', '--keep-going', action='store_true',
                     help='keep starting commands after one failed')
    add_to_argparse(run)
    report = sub.add_parser('report', help='write the HTML report of a build from its trace',
                            description='Write one self-contained HTML page of a build from '
                            'its Chrome trace (--trace, --process-spawner-trace): the slots\' '
                            'timeline, parallelism, memory, the longest commands, the waits, '
                            'the failed commands and the critical path.')
    report.add_argument('trace', metavar='TRACE', help='the trace (JSON)')
    report.add_argument('-o', '--output', metavar='FILE', default=None,
                        help='the page to write (default: TRACE with .html for .json)')
    return parser


def report_command(args):
    from .report import write_report
    output = args.output or os.path.splitext(args.trace)[0] + '.html'
    problem = write_report(args.trace, output)
    if problem:
        sys.stderr.write('%s report: %s\n' % (_PROG, problem))
        return 1
    return 0


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError('expected a positive number, got %r' % text)
    return value


class _Interrupted(BaseException):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum, frame):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt()
    raise _Interrupted(signum)


def run_command(args):
    try:
        source = sys.stdin.buffer if args.file == '-' else open(args.file, 'rb')
    except OSError as e:
        sys.stderr.write('%s: %s: %s\n' % (_PROG, args.file, e.strerror))
        return 2
    if getattr(args, 'status', None) is None:     # SPAWNPOOL_STATUS sets the default
        args.status = os.environ.get('SPAWNPOOL_STATUS') or None
    settings = Settings.from_values(args)
    problems = []
    watch = SignalWatch()
    jobserver = _jobserver.from_environ() if settings.jobserver else None
    # The status goes to stderr: stdout is the commands' own output.
    session = Session(settings, args.jobs, problems.append, jobserver, watch,
                      process_name='spawnpool run', status_fd=2)
    try:
        _say(problems)
        if settings.trace and session.trace is None:
            return 2
        try:
            from . import Pool          # the compiled module: ImportError when unusable
            if settings.commands_may_wait(session.jobserver):
                watch.start()   # the pool looks at its pipe before each start
            pool = Pool(slots=args.jobs, **session.pool_options('%s: warning: ' % _PROG))
        except (OSError, RuntimeError, ImportError, ValueError) as e:
            sys.stderr.write('%s: cannot start the pool: %s\n' % (_PROG, e))
            return 2
        with pool:
            runner = session.start(pool)
            if session.status is not None:
                session.status.begin(os.getcwd(), [os.path.abspath(args.file)])
            status = _Batch(_lines(source), runner, session, args.keep_going).run(args.jobs)
    finally:
        session.finish()
        if source is not sys.stdin.buffer:
            source.close()
    _say(problems)      # finish()'s: a report that could not be written
    report = session.report(_PROG)
    if report:
        console_message(report)
    return status


def _say(problems):
    """Print the session's warnings collected so far, and forget them."""
    while problems:
        console_message('%s: %s\n' % (_PROG, problems.pop(0)))


def _lines(source):
    """(line number, command) for each non-blank line, decoded as file names are."""
    for number, raw in enumerate(source, 1):
        line = os.fsdecode(raw.rstrip(b'\n'))
        if line.strip():
            yield number, line


class _Batch:
    """Hands lines to worker threads; stops handing them out after a failure."""

    def __init__(self, lines, runner, session, keep_going):
        self._lines = lines
        self._runner = runner
        self._session = session
        self._keep_going = keep_going
        self._cwd = os.getcwd()
        self._lock = threading.Lock()   # guards the fields below and the line iterator
        self._all_done = threading.Condition(self._lock)   # notified as workers end
        self._live = 0                  # workers still running
        self._stopping = False
        self._running = 0
        self.failures = 0

    def run(self, jobs):
        """Run every line (or until a failure); the exit status for the whole batch."""
        workers = [threading.Thread(target=self._work, name='spawnpool-run-%d' % i,
                                    daemon=True) for i in range(jobs)]
        handler = chain(_raise_interrupted, self._interrupt)
        stock = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
        interrupted = None
        try:
            self._live = len(workers)
            for worker in workers:
                worker.start()
            # Wait on a condition, not Thread.join(): on 3.11 a join() interrupted by a
            # signal handler's exception marks a still-running thread as finished.
            while True:
                try:
                    with self._lock:
                        while self._live:
                            self._all_done.wait()
                    break
                except (KeyboardInterrupt, _Interrupted) as e:
                    if interrupted is not None:   # asked twice: stop the commands now
                        self._session.base.cancel(signal.SIGKILL)
                    interrupted = getattr(e, 'signum', signal.SIGINT)
        finally:
            for signum, old in stock.items():
                signal.signal(signum, old)
        if interrupted is not None:
            console_message('%s: *** %s\n' % (_PROG, signal.strsignal(interrupted)))
            return 128 + interrupted
        return 1 if self.failures else 0

    def _interrupt(self, signum):
        # In the signal handler, before it raises: no new line starts, waiting commands
        # give up, and a signal sent to this process alone reaches the commands.
        self._stopping = True
        self._session.interrupt(signum)

    def _work(self):
        try:
            self._work_loop()
        finally:
            with self._lock:
                self._live -= 1
                self._all_done.notify_all()

    def _work_loop(self):
        while True:
            with self._lock:
                if self._stopping:
                    return
                try:
                    number, line = next(self._lines)
                except StopIteration:
                    return
                except (OSError, ValueError) as e:
                    self._stopping = True
                    self.failures += 1
                    console_message('%s: *** reading the commands: %s\n' % (_PROG, e))
                    return
                self._running += 1
            result = self._runner.run(Command([SHELL, '-c', line], cwd=self._cwd))
            self._finished(number, line, result)

    def _finished(self, number, line, result):
        with self._lock:
            self._running -= 1
            if result.started and result.returncode == 0:
                return
            self.failures += 1
            message = '%s: *** [line %d] %s: %s\n' % (_PROG, number, _why(result), line)
            if not self._keep_going and not self._stopping:
                self._stopping = True
                if self._running:
                    message += '%s: *** Waiting for unfinished jobs....\n' % _PROG
        console_message(message)


def _why(result):
    if not result.started:
        return result.failure_text()
    if result.oom_killed and result.returncode == -signal.SIGKILL:
        return result.error_message
    if result.returncode < 0:
        status = signal.strsignal(-result.returncode) or 'Signal %d' % -result.returncode
    else:
        status = 'Error %d' % result.returncode
    return '%s, %s' % (status, result.error_message) if result.oom_killed else status
