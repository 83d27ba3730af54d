"""Helpers of the reliability scenarios: process bookkeeping through /proc, running code
as another user, finding the build tree. Imported by conftest.py and the tests (a module
name of its own, so that it never clashes with another suite's conftest)."""

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time

import spawnpool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import cgroup_support  # noqa: E402  (tests/support: memory cgroups of the test's own)

PR_SET_CHILD_SUBREAPER = 36
SHM = "/dev/shm"
# How a pool's segment (a memfd, engine/src/spawners/segment.h) shows in /proc/*/fd and
# /proc/*/maps.
SEGMENT_MEMFD = "/memfd:spawnpool-segment"
PYTHON = "/usr/bin/python3"

libc = ctypes.CDLL(None, use_errno=True)


# ---------------------------------------------------------------- /proc helpers

def proc_stat(pid):
    """(state, ppid, pgid, start time) of `pid`, or None once it is gone (reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def is_running(pid):
    """True while `pid` exists and is not a zombie."""
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def children_of(pid):
    """Pids whose parent is `pid` (zombies included)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st and st[1] == pid:
                out.append(int(entry))
    return out


def descendants_of(pid):
    found, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def zombies_among(pids):
    return [p for p in pids if (proc_stat(p) or ("?",))[0] == "Z"]






def segment_mappings(pid="self"):
    """Inodes of the pool segments `pid` maps (a segment is mapped once per process).
    Also /dev/shm/spawnpool-* mappings (the named segments of older builds), by name."""
    found = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith(SEGMENT_MEMFD):
                found.add(int(fields[4]))
            elif len(fields) >= 6 and fields[5].startswith("/dev/shm/spawnpool-"):
                found.add(fields[5])
    return found


def segment_fds(pid="self"):
    """fd -> inode of each descriptor `pid` holds to a pool segment."""
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{name}"
        try:
            if os.readlink(path).startswith(SEGMENT_MEMFD):
                found[int(name)] = os.stat(path).st_ino
        except OSError:  # closed since the listing
            pass
    return found


def processes_mapping(inode):
    """Pids of the live processes that map the segment `inode`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if inode in segment_mappings(int(entry)):
                    found.append(int(entry))
            except OSError:  # gone, or not ours to read
                pass
    return found


def shm_objects():
    return {n for n in os.listdir(SHM) if n.startswith("spawnpool-")}


def wait_until(predicate, timeout, interval=0.01):
    """Polls `predicate` until true or `timeout` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def kill_and_reap(processes):
    """SIGKILLs each (pid, start time) still running, then reaps those that are our
    children. The start time guards against a pid reused by an unrelated process."""
    mine = []
    for pid, started in processes:
        st = proc_stat(pid)
        if st is None or st[3] != started:
            continue
        mine.append(pid)
        if st[0] not in ("Z", "X"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in mine:
        reap(pid, timeout=2)


def reap(pid, timeout=2.0):
    """Reaps `pid` if it is (or becomes, through the subreaper) our child."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got, _ = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                return True
        except ChildProcessError:
            # Not our child (yet): an orphan is re-parented only once its parent exits.
            if proc_stat(pid) is None:
                return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def nobody_can_run():
    return os.geteuid() == 0 and os.path.exists("/usr/bin/setpriv")


def run_as_nobody(code, *args, timeout=30):
    """Runs Python `code` (with `args` in sys.argv[1:]) as user nobody, isolated from our
    environment; returns its stdout parsed as JSON."""
    cmd = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
           PYTHON, "-I", "-c", code, *args]
    out = subprocess.run(cmd, capture_output=True, timeout=timeout, check=True, cwd="/")
    return json.loads(out.stdout)


def build_dir():
    """The CMake build tree the imported spawnpool package was assembled in."""
    package = os.path.dirname(os.path.abspath(spawnpool.__file__))
    return os.path.dirname(os.path.dirname(package))
