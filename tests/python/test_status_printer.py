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


class _Recorder:
    """A printer that keeps what it is given."""

    def __init__(self):
        self.writes = []

    def write(self, fd, data):
        self.writes.append((fd, data))


def test_the_streams_hand_the_printer_whole_lines_as_a_line_buffered_stream_does():
    import io
    from spawnpool.status import _PrinterStream
    printer = _Recorder()
    stream = _PrinterStream(io.StringIO(), 2, printer)
    print("cc -c a.c", file=stream)     # print() writes the text, then its end
    assert printer.writes == [(2, b"cc -c a.c\n")]
    stream.write("compiling ")          # a line begun: held until its end comes
    stream.write(b"b.c")
    assert len(printer.writes) == 1
    stream.write("\nand a line after it\n")
    assert printer.writes[1] == (2, b"compiling b.c\nand a line after it\n")
    stream.write("no end")              # flush() gives what is held, as it is
    stream.flush()
    stream.flush()                      # and nothing twice
    assert printer.writes[2:] == [(2, b"no end")]
    stream.write("[50%]\r")             # a carriage return ends a line too (Progress())
    assert printer.writes[3:] == [(2, b"[50%]\r")]
    stream.write("")
    stream.flush()
    assert len(printer.writes) == 4


def test_a_line_left_unended_is_written_when_the_status_finishes(capfd):
    import sys
    from spawnpool.status import BuildStatus
    r, w = os.pipe()
    try:
        status = BuildStatus("plain", fd=w)
        status.begin(os.getcwd(), ["all"])
        sys.stdout.write("begun and not ended")
        status.finish()
        assert not hasattr(sys.stdout, "_pending")  # the stock stream is back
        assert capfd.readouterr().out == "begun and not ended"
    finally:
        os.close(r)
        os.close(w)


def test_a_driver_names_the_files_it_expects_to_build(capfd):
    from spawnpool.status import BuildStatus
    r, w = os.pipe()
    try:
        status = BuildStatus("plain", fd=w)
        progress = status.begin(os.getcwd(), ["all"])
        status.expect_outputs([os.path.abspath("out.o"), "/elsewhere/lib.a"])  # none known
        status.expect(2)
        assert progress.view()["total"] == 2
        status.finish()
    finally:
        os.close(r)
        os.close(w)
