"""/proc readers and polling for the spawnpool module tests (imported by conftest.py and
the tests; a module of its own so that its name cannot clash with other conftest files)."""

import os
import time

MARKER = "SPAWNPOOL_TEST_OWNER"


def wait_until(predicate, timeout=10.0, interval=0.01):
    """Polls predicate until it is true or timeout seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def proc_stat(pid):
    """(state, ppid) of pid, or (None, None) once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None, None
    fields = text[text.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[1])


def process_gone(pid):
    """Gone, or a zombie waiting for its new parent (init) to reap it."""
    state, _ = proc_stat(pid)
    return state in (None, "Z", "X")


def all_pids():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def children_of(parent, with_zombies=False):
    out = []
    for pid in all_pids():
        state, ppid = proc_stat(pid)
        if ppid == parent and (with_zombies or state not in (None, "Z", "X")):
            out.append(pid)
    return sorted(out)


def exe_name(pid):
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def command_of(spawner_pid, name, timeout=10.0):
    """The pid of the command named `name` that spawner_pid runs, after it has exec'd,
    plus 200 ms for the spawner to record it (a cancel before that finds none)."""
    found = wait_until(lambda: [p for p in children_of(spawner_pid) if exe_name(p) == name],
                       timeout)
    if not found:
        return None
    time.sleep(0.2)
    return found[0]


def open_fds():
    """fd -> target; the listing's own directory fd is closed by then and drops out."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return fds


# How a pool's segment (a memfd, engine/src/spawners/segment.h) shows in /proc/*/fd and
# /proc/*/maps.
SEGMENT_MEMFD = "/memfd:spawnpool-segment"


def shm_entries():
    return {name for name in os.listdir("/dev/shm") if name.startswith("spawnpool-")}


def processes_with_env(entry):
    entry = entry.encode()
    found = []
    for pid in all_pids():
        if pid == os.getpid() or process_gone(pid):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if entry in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


def describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmdline = "?"
    state, ppid = proc_stat(pid)
    return f"{pid} (state {state}, ppid {ppid}): {cmdline}"
