"""The build's status line (issue 18): which mode a build gets, and the console under it.

`status_mode()` decides from the option (auto, line, plain, off), the stream and the
environment's conventions, as every front end does: the engine's status_mode
(engine/src/progress/status_mode.h says how), with this process's TERM and
CLICOLOR_FORCE or those of `environ`.  Without the compiled module there is no status
line (None).

`BuildStatus` owns one build's progress (the compiled BuildProgress, fed by the pool)
and, once the build starts, its printer (the compiled StatusPrinter, which owns the
bottom line; it reads the locale and the terminal's kind from the environment).  While
it prints, every write to sys.stdout and sys.stderr, every command's output (captured by
the engine's sync layer, which the session stacks for the status line, and printed
through output_sync.py) and every driver message goes through the printer, so that no
output line is cut or overwritten by the status line.

Threading: begin() and finish() on one thread (the driver's main thread); the streams,
expect() and the counts from any.
"""

import os
import sys
import threading

__all__ = ['MODES', 'BuildStatus', 'status_mode']

MODES = ('auto', 'line', 'plain', 'off')


def status_mode(setting, fd=1, environ=None):
    """'line', 'plain' or None (off) for the option's value `setting` on `fd`."""
    try:
        from ._spawnpool import status_mode as engine_status_mode
    except ImportError:
        return None     # no compiled module: no status line
    environ = os.environ if environ is None else environ
    return engine_status_mode(setting or 'auto', fd, environ.get('TERM', ''),
                              environ.get('CLICOLOR_FORCE', '0') not in ('', '0'))


class _PrinterStream:
    """sys.stdout or sys.stderr while the status prints: text goes through the printer
    (as the stream's bytes, to the stream's fd); everything else is the stream's.

    Line-buffered, as Python's own stream on a terminal is: a write without a newline
    (or a carriage return) is held until the rest of its line, or flush(), comes. print()
    writes its text and then its end: the printer gets the line whole, in one call and
    one system call, not two (each of SCons' command lines, issue 18's cost)."""

    def __init__(self, stream, fd, printer):
        self._stream = stream
        self._fd = fd
        self._printer = printer
        self._encoding = getattr(stream, 'encoding', None) or 'utf-8'
        self._errors = getattr(stream, 'errors', None) or 'strict'
        self._pending = []              # the line begun and not ended, as bytes
        self._lock = threading.Lock()   # job threads print too

    def write(self, text):
        data = text if isinstance(text, bytes) else text.encode(self._encoding, self._errors)
        with self._lock:
            if b'\n' not in data and b'\r' not in data:
                self._pending.append(data)
                return len(text)
            if self._pending:
                self._pending.append(data)
                data = b''.join(self._pending)
                self._pending = []
            self._emit(data)
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        with self._lock:
            if self._pending:
                data = b''.join(self._pending)
                self._pending = []
                self._emit(data)

    def _emit(self, data):
        if not data:
            return
        try:
            self._stream.flush()        # what was written to it directly, still in its buffer
        except (OSError, ValueError):
            pass
        self._printer.write(self._fd, data)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class BuildStatus:
    """One build's progress and, between begin() and finish(), its printer."""

    def __init__(self, mode, history=None, fd=1):
        from . import _spawnpool
        self.mode = mode
        self.fd = fd
        self._module = _spawnpool
        self.progress = _spawnpool.BuildProgress(history)
        self._history = history
        self._printer = None
        self._streams = None
        self._lock = threading.Lock()

    @property
    def begun(self):
        return self._printer is not None

    def begin(self, top_dir, targets):
        """The build starts (its commands count from now): the progress learns its
        targets' last build from the history, and the printer takes the console."""
        from . import output_sync
        key = self._module.hash_targets(str(top_dir), [str(t) for t in targets])
        self.progress.begin(key)
        self._printer = self._module.StatusPrinter(self.progress, self.fd, self.mode)
        output_sync.set_console_printer(self._printer)
        stdout = _PrinterStream(sys.stdout, 1, self._printer)
        stderr = _PrinterStream(sys.stderr, 2, self._printer)
        self._streams = (sys.stdout, sys.stderr, stdout, stderr)  # the stock ones, ours
        sys.stdout, sys.stderr = stdout, stderr
        return self.progress

    def expect(self, commands):
        """The driver expects `commands` more commands beyond those submitted (None:
        it cannot tell; the history's last build then says)."""
        self.progress.set_expected_remaining(None if commands is None else max(0, int(commands)))

    def expect_outputs(self, paths):
        """Absolute paths of files the commands still to come will write (the targets the
        driver knows are out of date): the history predicts each such command by the one
        that wrote its file last."""
        self.progress.expect_outputs([str(path) for path in paths])

    def view(self):
        return self.progress.view()

    def finish(self, interrupted=False):
        """Clear the line, write the summary line (`interrupted`: the build was stopped),
        give the console back (idempotent)."""
        from . import output_sync
        with self._lock:
            printer, self._printer = self._printer, None
            streams, self._streams = self._streams, None
        if printer is None:
            return
        if streams is not None:
            for proxy in streams[2:]:
                proxy.flush()           # a line begun and never ended: as it is
            if isinstance(sys.stdout, _PrinterStream):
                sys.stdout = streams[0]
            if isinstance(sys.stderr, _PrinterStream):
                sys.stderr = streams[1]
        output_sync.set_console_printer(None)
        printer.finish(interrupted)
