"""/proc readers and polling for the spawnpool module tests (imported by conftest.py and
the tests; a module of its own so that its name cannot clash with other conftest files)."""

import gc
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


class LeakCheck:
    """What a test that starts a pool must leave as it found it (tests/python/conftest.py
    and tests/distributed use it): the same open fds, the same child processes (zombie or
    alive), no process left that carries MARKER=<this pid> (spawners and commands run with
    the driver's environment inherit it; the caller sets it), no pool segment left here
    (no descriptor or mapping of the memfd), no /dev/shm/spawnpool-* entry appearing."""

    def __init__(self):
        self.marker = f"{MARKER}={os.getpid()}"
        self.fds = open_fds()
        self.children = children_of(os.getpid(), with_zombies=True)
        self.shm = shm_entries()

    def problems(self):
        """What leaked, as sentences (empty: nothing)."""
        # A closed pool keeps its segment until the object goes, and a test's exception
        # tracebacks keep its frame (and the pool) in a reference cycle.
        gc.collect()
        problems = []
        fds_after = open_fds()
        if fds_after.keys() != self.fds.keys():
            added = {fd: t for fd, t in fds_after.items() if fd not in self.fds}
            removed = {fd: t for fd, t in self.fds.items() if fd not in fds_after}
            problems.append(f"open fds changed: added {added}, removed {removed}")
        children_after = children_of(os.getpid(), with_zombies=True)
        if children_after != self.children:
            problems.append("children changed: " + "; ".join(
                describe(p) for p in set(children_after) ^ set(self.children)))
        wait_until(lambda: not processes_with_env(self.marker), timeout=5)
        left = processes_with_env(self.marker)
        if left:
            problems.append("processes of this test still running: " +
                            "; ".join(describe(p) for p in left))
        with open("/proc/self/maps") as f:
            maps = f.read()
        if SEGMENT_MEMFD in maps or "/dev/shm/spawnpool-" in maps:
            problems.append("a spawnpool segment is still mapped in this process")
        segment_fds = [fd for fd, t in fds_after.items() if t.startswith(SEGMENT_MEMFD)]
        if segment_fds:
            problems.append(f"descriptors of a spawnpool segment left: {segment_fds}")
        wait_until(lambda: not (shm_entries() - self.shm), timeout=3)
        new_shm = shm_entries() - self.shm
        if new_shm:
            problems.append(f"/dev/shm entries left: {sorted(new_shm)}")
        return problems
