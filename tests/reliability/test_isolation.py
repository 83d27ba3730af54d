"""Isolation of a running pool from other processes and other users.

What is checked, and how:
- the segment is an anonymous memfd (engine/src/spawners/segment.cc): it never has a
  name in /dev/shm, not even during the start (strace(1) shows memfd_create with
  MFD_CLOEXEC, no open or unlink of a /dev/shm path); it is sealed against resizing
  (F_GET_SEALS), so a spawner cannot shrink it under the driver's mapping;
- the driver's and each spawner's /proc/<pid>/maps show the same segment, no spawner
  keeps a descriptor to it, and the driver's own descriptor is close-on-exec; each pool
  has its own segment;
- another user (nobody, via setpriv) reaches nothing of a running pool: not the
  driver's or the spawners' descriptors (/proc/<pid>/fd, pidfd_getfd), memory
  (/proc/<pid>/mem), mappings (/proc/<pid>/maps, map_files), nor can it signal them;
  the lifeline is an unnamed socketpair, reachable only through those descriptors.
Processes of the same user are trusted: they can ptrace the driver anyway.
"""

import fcntl
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from reliability_support import (PYTHON, SEGMENT_MEMFD, nobody_can_run, run_as_nobody,
                                 segment_fds, segment_mappings, shm_objects)

O_CLOEXEC = 0o2000000
F_GET_SEALS = 1034
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW = 0x1, 0x2, 0x4


def new_segment(before):
    segments = segment_mappings() - before
    assert len(segments) == 1, f"expected one new segment mapping, found {segments}"
    return segments.pop()


def test_segment_is_a_sealed_memfd_only_the_pool_holds(make_pool):
    before, shm_before = segment_mappings(), shm_objects()
    pool = make_pool(slots=2)
    segment = new_segment(before)
    assert isinstance(segment, int), f"a named segment: {segment}"
    assert not shm_objects() - shm_before

    for pid in pool.spawner_pids:
        assert segment_mappings(pid) == {segment}
        assert segment_fds(pid) == {}, f"spawner {pid} keeps a descriptor to the segment"

    # The driver keeps one descriptor (to start replacements), close-on-exec: a program
    # it starts any other way does not inherit it.
    fds = [fd for fd, inode in segment_fds().items() if inode == segment]
    assert len(fds) == 1, fds
    with open(f"/proc/self/fdinfo/{fds[0]}") as f:
        flags = int(re.search(r"flags:\s+(\d+)", f.read()).group(1), 8)
    assert flags & O_CLOEXEC
    assert fcntl.fcntl(fds[0], F_GET_SEALS) == F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW
    listing = subprocess.run(["ls", "-l", "/proc/self/fd"], close_fds=False,
                             capture_output=True, text=True).stdout
    assert SEGMENT_MEMFD not in listing, listing
    assert pool.run(["/bin/echo", "still works"], capture=True).stdout == b"still works\n"


def test_each_pool_has_its_own_segment(make_pool):
    segments = set()
    for _ in range(3):
        before = segment_mappings()
        make_pool(slots=1)
        segments.add(new_segment(before))
    assert len(segments) == 3


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install -y strace)")
def test_the_segment_never_has_a_name(driver_process, tmp_path):
    log = tmp_path / "strace.log"
    driver = subprocess.Popen(
        ["strace", "-f", "-o", str(log), "-e", "trace=memfd_create,openat,unlink,fcntl",
         PYTHON, "-c", "import spawnpool\n"
                       "with spawnpool.Pool(slots=1) as p:\n"
                       "    print(p.run(['/bin/echo', 'ok'], capture=True).stdout.decode())\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        out, _ = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
    assert driver.returncode == 0 and out.strip() == "ok"
    trace = log.read_text()
    created = re.search(r'memfd_create\("spawnpool-segment", ([A-Z_|]+)\)\s*= (\d+)', trace)
    assert created, trace
    assert {"MFD_CLOEXEC", "MFD_ALLOW_SEALING"} <= set(created.group(1).split("|"))
    assert re.search(r"fcntl\(\d+, F_ADD_SEALS, F_SEAL_SEAL\|F_SEAL_SHRINK\|F_SEAL_GROW\)"
                     r"\s*= 0", trace), trace
    assert "/dev/shm" not in trace, trace


NOBODY_PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_getfd = 438
targets = json.loads(sys.argv[1])

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as e:
        return e.errno

def read(path):
    with open(path, "rb") as f:
        f.read(1)

def write(path):
    with open(path, "wb") as f:
        f.write(b"\x09")

def getfd(pid, fd):
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        os.close(got)
    finally:
        os.close(pidfd)

results = {}
for pid in targets:
    r = results[str(pid)] = {}
    r["list fd"] = attempt(lambda: os.listdir(f"/proc/{pid}/fd"))
    for fd in range(3, 12):
        r[f"write fd {fd}"] = attempt(lambda: write(f"/proc/{pid}/fd/{fd}"))
        r[f"pidfd_getfd {fd}"] = attempt(lambda: getfd(pid, fd))
    r["list map_files"] = attempt(lambda: os.listdir(f"/proc/{pid}/map_files"))
    r["read maps"] = attempt(lambda: read(f"/proc/{pid}/maps"))
    r["read mem"] = attempt(lambda: read(f"/proc/{pid}/mem"))
    r["write mem"] = attempt(lambda: write(f"/proc/{pid}/mem"))
    r["signal"] = attempt(lambda: os.kill(pid, 0))
print(json.dumps(results))
"""


@pytest.mark.skipif(not nobody_can_run(), reason="needs root and setpriv to act as nobody")
def test_another_user_reaches_nothing_of_a_running_pool(make_pool):
    pool = make_pool(slots=2)
    spawners = list(pool.spawner_pids)
    targets = spawners + [os.getpid()]
    results = run_as_nobody(NOBODY_PROBE, json.dumps(targets))

    succeeded = {f"{pid}: {what}": how for pid, r in results.items()
                 for what, how in r.items() if how not in (1, 13)}  # EPERM, EACCES
    assert not succeeded, succeeded

    # The pool noticed nothing: same spawners, commands still run.
    time.sleep(0.1)
    assert pool.spawner_pids == spawners
    assert pool.run(["/bin/echo", "ok"], capture=True).stdout == b"ok\n"
