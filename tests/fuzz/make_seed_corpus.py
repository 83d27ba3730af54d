#!/usr/bin/python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/.

The files are committed; run this again only when the protocol's layout changes
(worker_pool/protocol/protocol.h). Each seed is small and named after what it exercises: valid
inputs reach the deep paths, invalid ones each stop at one check of the decoder.
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE, MERGE = 1, 2


def request(argv, env=(), cwd=b"", flags=0, argc=None, envc=None, size=None, tail=b""):
    """RequestHeader {u32 flags, argc, envc, number; u64 payload_size} + payload."""
    payload = b"".join(s + b"\0" for s in list(argv) + list(env) + [cwd]) + tail
    header = struct.pack("<IIIIQ", flags, len(argv) if argc is None else argc,
                         len(env) if envc is None else envc, 0,
                         len(payload) if size is None else size)
    return header + payload


def reply_header(stdout_size, stderr_size, offset, size, stage=0, errno=0, status=0):
    """ReplyHeader: 4 x i32, 9 x i64 (rusage, peak memory, timestamps), 4 x u64 (sizes,
    chunk)."""
    return struct.pack("<iiii9q4Q", stage, errno, status, 0, 1000, 2000, 3000, 3 << 20,
                       10, 15, 20, 30, 40, stdout_size, stderr_size, offset, size)


def reply(capacity, records):
    """u32 chunk capacity (the target uses 1 + value % 8192), then header + chunk bytes."""
    out = struct.pack("<I", capacity - 1)
    for header, chunk in records:
        out += header + chunk.ljust(capacity, b"\0")
    return out


def requests():
    env = [b"PATH=/usr/bin:/bin", b"LANG=C.UTF-8", b"EMPTY="]
    yield "valid-echo-captured", request([b"/bin/echo", b"hi"], env, b"/tmp", CAPTURE)
    yield "valid-merged", request([b"sh", b"-c", b"echo out; echo err >&2"], env, b"",
                                  CAPTURE | MERGE)
    yield "valid-passthrough-no-env", request([b"true"])
    yield "valid-empty-args", request([b"prog", b"", b""], [b"A=1"], b"/")
    yield "bad-size-zero", request([b"true"], size=0)
    yield "bad-size-beyond-capacity", request([b"true"], size=4096)
    yield "bad-unknown-flags", request([b"true"], flags=0x80)
    yield "bad-argc-zero", request([b"true"], argc=0)
    yield "bad-counts-beyond-payload", request([b"true"], argc=1, envc=0xFFFFFFFF)
    yield "bad-no-final-nul", request([b"true"])[:-1] + b"x"
    yield "bad-fewer-strings", request([b"abcdefgh"], argc=3)
    yield "bad-trailing-bytes", request([b"true"], tail=b"junk\0")
    yield "bad-empty-program", request([b"", b"arg"])


def replies():
    yield "valid-one-chunk", reply(64, [(reply_header(3, 4, 0, 7), b"outerr!")])
    yield "valid-two-chunks", reply(16, [
        (reply_header(20, 10, 0, 16), b"o" * 16),
        (reply_header(20, 10, 16, 14), b"oooo" + b"e" * 10)])
    yield "valid-three-chunks-full", reply(8, [
        (reply_header(10, 10, 0, 8), b"o" * 8),
        (reply_header(10, 10, 8, 8), b"oo" + b"e" * 6),
        (reply_header(10, 10, 16, 4), b"eeee")])
    yield "valid-exec-failure", reply(64, [(reply_header(0, 0, 0, 0, stage=3, errno=2), b"")])
    yield "valid-signalled", reply(64, [(reply_header(0, 0, 0, 0, status=9), b"")])
    yield "bad-stage", reply(64, [(reply_header(0, 0, 0, 0, stage=7), b"")])
    # kSpawnerDied: the engine's own verdict, never a spawner's.
    yield "bad-engine-stage", reply(64, [(reply_header(0, 0, 0, 0, stage=5), b"")])
    yield "bad-size-too-large", reply(64, [(reply_header(1 << 41, 0, 0, 8), b"x" * 8)])
    yield "bad-offset", reply(64, [(reply_header(8, 0, 4, 4), b"xxxx")])
    yield "bad-chunk-beyond-capacity", reply(8, [(reply_header(32, 0, 0, 16), b"x" * 8)])
    yield "bad-empty-chunk-while-incomplete", reply(8, [(reply_header(8, 0, 0, 0), b"")])
    # Found by fuzzing: a first chunk announcing ~1 TiB made the driver reserve it all.
    yield "regression-huge-announced-size", reply(64, [
        (reply_header(1 << 40, 1 << 40, 0, 64), b"x" * 64)])


def write(target, seeds):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("fuzz_decode_request", requests())
    write("fuzz_reply_chunks", replies())
