"""Synchronized output: each command's output printed as one block when it finishes.

`SyncOutput` is the layer (stack.py): a passthrough command runs captured and its
output is printed by `OutputSync.emit()` when it ends; a command whose caller captures
passes untouched.  `console_message()` is the package's one way to print a driver
message to the console.

GNU make's ``-O`` is the reference.  When this process's stdout and stderr are the same
open file (a terminal, or ``> log 2>&1``), a command's stdout and stderr are captured
merged in the spawner (one pipe, so the bytes keep the order the command wrote them) and
the block goes to stdout.  Otherwise they are captured apart and written as the stdout
block, then the stderr block, each to its own stream.

Colour: a command writes into a pipe, so a tool that asks isatty() turns colour off.
Nothing tty-like is faked (no pty, no variables exported): escape codes that a command
writes anyway (``-fdiagnostics-color=always``) are passed through byte for byte.

Thread-safe: `emit()` and console_message() hold one lock per process while writing,
so blocks and messages never interleave with one another.  While a status line prints
(status.py), both write through its printer, which clears and redraws the line.
"""

import os
import select
import sys
import threading

from .command import CAPTURE, CAPTURE_MERGED, PASSTHROUGH, Command

__all__ = ['OutputSync', 'SyncOutput', 'console_message', 'output_block', 'same_open_file',
           'write_all', 'set_console_printer']

# One lock for the whole process: two OutputSync objects (a resized pool) still share the
# console.
_console_lock = threading.Lock()
# The status line's printer (status.py) while it owns the console, else None.
_printer = None


def set_console_printer(printer):
    """Send the console's writes through `printer` (None: straight to the fds again)."""
    global _printer
    with _console_lock:
        _printer = printer


def _write(fd, data):
    printer = _printer
    if printer is not None:
        printer.write(fd, data)
    else:
        write_all(fd, data)


def same_open_file(fd_a, fd_b):
    """Whether two descriptors refer to the same file (make compares st_dev/st_ino too)."""
    try:
        a, b = os.fstat(fd_a), os.fstat(fd_b)
    except OSError:
        return False
    return a.st_ino == b.st_ino and a.st_dev == b.st_dev


def write_all(fd, data):
    """Write all of `data`, also to a descriptor someone set non-blocking."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])


def console_message(text, fd=2):
    """Write a driver message (str) whole to fd 2 (or `fd`), never in the middle of a
    command's block, after what Python's sys.stdout/sys.stderr hold.  The fd, not
    sys.stderr: SCons points sys.stderr at config.log during Configure checks."""
    with _console_lock:
        _flush(sys.stdout)
        _flush(sys.stderr)
        try:
            _write(fd, text.encode(errors='surrogateescape'))
        except BrokenPipeError:
            pass


class OutputSync:
    """Says how to capture a command (`merged`) and prints its output as one block."""

    def __init__(self, stdout_fd=1, stderr_fd=2):
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd
        #: Capture stderr into stdout (True when both go to the same file).
        self.merged = same_open_file(stdout_fd, stderr_fd)
        #: The output mode to run a command in.
        self.capture_mode = CAPTURE_MERGED if self.merged else CAPTURE

    def emit(self, stdout, stderr):
        """Print one command's captured output (bytes or None) as one block."""
        _emit(self.stdout_fd, self.stderr_fd, stdout, stderr)


def output_block(stdout, stderr):
    """Print one command's captured output (bytes or None) as one block on fds 1 and 2:
    where the engine's layers (the launcher's distcc compiles) print theirs."""
    _emit(1, 2, stdout, stderr)


def _emit(stdout_fd, stderr_fd, stdout, stderr):
    if not stdout and not stderr:
        return
    with _console_lock:
        # Text the driver printed through Python's buffers (SCons' command echo) goes
        # first, as it would have with the command writing to the same fds.
        _flush(sys.stdout)
        _flush(sys.stderr)
        try:
            if stdout:
                _write(stdout_fd, stdout)
            if stderr:
                _write(stderr_fd, stderr)
        except BrokenPipeError:
            pass    # the reader went away; the command itself would have got EPIPE


class SyncOutput:
    """The layer: passthrough commands run captured and print as one block at their end."""

    def __init__(self, inner, sync=None):
        self.inner = inner
        self.sync = sync if sync is not None else OutputSync()

    def run(self, command):
        if command.output != PASSTHROUGH:
            return self.inner.run(command)      # the caller captures: its bytes
        sync = self.sync
        result = self.inner.run(Command(command.argv, command.env, command.cwd,
                                        sync.capture_mode, command.local))
        sync.emit(result.stdout, result.stderr)
        return result


def _flush(stream):
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        pass
