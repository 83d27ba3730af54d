"""``spawnpool run``: one shell command per input line, through the pool (like xargs -P).

    spawnpool run -j 4 commands.txt
    generate-commands | spawnpool run -j 8 --output=sync --stats -

Each non-blank line runs as ``/bin/sh -c LINE`` (directly when it needs no shell, see
direct_exec.py), at most N at a time.  As make does, the first failure stops new commands
from starting (running ones finish); ``-k`` runs everything.  Each failure is reported as
``spawnpool: *** [line 3] Error 2: <command>``.  Exit status: 0 when every command
succeeded, 1 when any failed, 2 for a usage error, 128+N when interrupted by signal N.

Threads: one worker thread per slot takes the next line and runs it (Pool.run releases
the GIL); the main thread only waits, so it is the one that sees Ctrl-C and SIGTERM.
"""

import argparse
import os
import signal
import sys
import threading

from . import Pool
from ._spawnpool import SpawnError
from .direct_exec import ENABLED_BY_DEFAULT as _DIRECT_DEFAULT
from .output_sync import console_message
from .runner import ShellRunner
from .stats import Stats
from .trace import TraceWriter

__all__ = ['main']

SHELL = '/bin/sh'
_PROG = 'spawnpool'


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == 'run':
        return run_command(args)
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
    run.add_argument('--output', choices=('passthrough', 'sync'), default='passthrough',
                     help='passthrough: as written (default); sync: one block per command')
    run.add_argument('--trace', metavar='FILE',
                     help='write a Chrome trace-event file (Perfetto, chrome://tracing)')
    run.add_argument('--stats', action='store_true',
                     help='print statistics to stderr at the end')
    run.add_argument('--direct-exec', choices=('yes', 'no'),
                     default='yes' if _DIRECT_DEFAULT else 'no',
                     help='run lines without shell syntax without the shell '
                          '(default: %(default)s)')
    return parser


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
    raise _Interrupted(signum)


def run_command(args):
    try:
        source = sys.stdin.buffer if args.file == '-' else open(args.file, 'rb')
    except OSError as e:
        sys.stderr.write('%s: %s: %s\n' % (_PROG, args.file, e.strerror))
        return 2
    stats = Stats(slots=args.jobs) if args.stats else None
    try:
        trace = TraceWriter(args.trace, process_name='spawnpool run') if args.trace else None
    except OSError as e:
        sys.stderr.write('%s: %s: %s\n' % (_PROG, args.trace, e.strerror))
        return 2
    runner = ShellRunner(output=args.output, direct_exec=args.direct_exec == 'yes',
                         trace=trace, stats=stats)
    try:
        try:
            pool = Pool(slots=args.jobs)
        except (OSError, RuntimeError) as e:
            sys.stderr.write('%s: cannot start the pool: %s\n' % (_PROG, e))
            return 2
        with pool:
            status = _Batch(_lines(source), runner, pool, args.keep_going).run(args.jobs)
    finally:
        if trace is not None:
            trace.close()
        if source is not sys.stdin.buffer:
            source.close()
    if stats is not None:
        console_message(stats.report(prefix=_PROG))
    return status


def _lines(source):
    """(line number, command) for each non-blank line, decoded as file names are."""
    for number, raw in enumerate(source, 1):
        line = os.fsdecode(raw.rstrip(b'\n'))
        if line.strip():
            yield number, line


class _Batch:
    """Hands lines to worker threads; stops handing them out after a failure."""

    def __init__(self, lines, runner, pool, keep_going):
        self._lines = lines
        self._runner = runner
        self._pool = pool
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
        stock = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
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
                    self._stopping = True
                    if interrupted is not None:
                        self._pool.cancel(signal.SIGKILL)   # asked twice: stop them now
                    interrupted = getattr(e, 'signum', signal.SIGINT)
                    # A terminal's Ctrl-C reached the spawners, which pass it on; other
                    # signals were sent to this process alone.
                    if interrupted != signal.SIGINT:
                        self._pool.cancel(interrupted)
        finally:
            for signum, handler in stock.items():
                signal.signal(signum, handler)
        if interrupted is not None:
            console_message('%s: *** %s\n' % (_PROG, signal.strsignal(interrupted)))
            return 128 + interrupted
        return 1 if self.failures else 0

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
            error = None
            try:
                status = self._runner.run(self._pool, [SHELL, '-c', line], None, self._cwd)
            except SpawnError as e:
                status, error = None, e
            self._finished(number, line, status, error)

    def _finished(self, number, line, status, error):
        with self._lock:
            self._running -= 1
            if status == 0:
                return
            self.failures += 1
            message = '%s: *** [line %d] %s: %s\n' % (_PROG, number, _why(status, error), line)
            if not self._keep_going and not self._stopping:
                self._stopping = True
                if self._running:
                    message += '%s: *** Waiting for unfinished jobs....\n' % _PROG
        console_message(message)


def _why(status, error):
    if error is not None:
        stage = getattr(error, 'stage', None)
        text = error.strerror or str(error)
        return '%s (stage %s)' % (text, stage) if stage else text
    if status < 0:
        return signal.strsignal(-status) or 'Signal %d' % -status
    return 'Error %d' % status
