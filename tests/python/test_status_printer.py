"""The status line's printer (engine/src/progress/status_printer.h) through the module: the
line cleared before each output and drawn again after it, from the text drawn last (no
view of the progress per output line: the redraw thread brings the line up to date)."""

import os
import time

from spawnpool_test_support import wait_until

CLEAR = b"\r\x1b[K"


def read_available(fd):
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_output_is_whole_and_the_line_drawn_again_is_the_last_drawn():
    from spawnpool import _spawnpool
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        progress = _spawnpool.BuildProgress()
        progress.begin(0)
        printer = _spawnpool.StatusPrinter(progress, w, "line", unicode=False,
                                           terminal_reflows=False)
        printer.write(w, b"one\n")
        progress.set_expected_remaining(5)      # the total changes: not drawn yet
        printer.write(w, b"two\n")
        printer.write(w, b"half a line, ")
        printer.write(w, b"the rest\n")
        out = read_available(r)
        # Each output whole, the line cleared before it (once one is shown).
        assert out.startswith(b"one\n" + CLEAR + b"[0/0 ")
        assert CLEAR + b"two\n" + CLEAR in out
        assert CLEAR + b"half a line, the rest\n" + CLEAR in out
        # The line drawn after each output is the one shown before it (the redraw thread
        # may have drawn one in between, on a slow machine).
        last, after_output = None, 0
        for piece in out.split(CLEAR):
            if piece.startswith(b"["):
                if last is not None and previous_was_output:
                    assert piece == last, out
                    after_output += 1
                last, previous_was_output = piece, False
            elif piece:
                previous_was_output = True
        assert after_output == 2, out
        # Within a redraw period (100 ms) the line shows the new total.
        seen = []
        assert wait_until(lambda: seen.append(read_available(r)) or b"/5 " in b"".join(seen),
                          timeout=5)
        printer.finish()
        assert read_available(r).endswith(b" elapsed, done\n")
    finally:
        os.close(r)
        os.close(w)
