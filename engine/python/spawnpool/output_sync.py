"""The package's console: where the engine's layers print while Python owns it.

Synchronized output itself (``--output=sync``, make's ``-O``; what the status line
forces) is the engine's sync layer (engine/src/stack/sync_layer.h, stacked by stack.py's
Session): a passthrough command runs captured and its output is printed as one block
when it ends.  The engine's console writes (engine/src/command/console.h: those blocks,
the launcher's messages and distcc blocks, sh's messages after direct exec) come here
(pool.py binds `console_message` and `output_block`), so that what Python's buffered
sys.stdout and sys.stderr hold is written first and, while a status line prints
(status.py), everything goes through its printer, which clears and redraws the line.
`console_message()` is also the package's one way to print a driver message.

Thread-safe: both writers hold one lock per process while writing, so blocks and
messages never interleave with one another.
"""

import os
import select
import sys
import threading

__all__ = ['console_message', 'output_block', 'write_all', 'set_console_printer']

# One lock for the whole process: every session and every layer share the console.
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


def write_all(fd, data):
    """Write all of `data` (bytes-like), also to a descriptor someone set non-blocking."""
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


def output_block(stdout, stderr):
    """Print one command's captured output (bytes-like or None; the engine lends views
    of its buffers for the call's length, so nothing here keeps them) as one block:
    `stdout` on fd 1, then `stderr` on fd 2."""
    if not stdout and not stderr:
        return
    with _console_lock:
        # Text the driver printed through Python's buffers (SCons' command echo) goes
        # first, as it would have with the command writing to the same fds.
        _flush(sys.stdout)
        _flush(sys.stderr)
        try:
            if stdout:
                _write(1, stdout)
            if stderr:
                _write(2, stderr)
        except BrokenPipeError:
            pass    # the reader went away; the command itself would have got EPIPE


def _flush(stream):
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        pass
