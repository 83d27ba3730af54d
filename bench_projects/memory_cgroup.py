"""A memory cap for one benchmark build: a memory cgroup under our own (cgroup v1 or v2).

    with MemoryCap(limit_bytes=3584 << 20) as cap:
        proc = subprocess.Popen(cap.command(["scons", "-j8"]))   # its first process joins
        proc.wait()
        kills = cap.oom_kills()
    # the cgroup is gone, and so is every process that was left in it

`MemoryCap` creates `<our memory cgroup>/<prefix>-<pid>-<random>` and caps it: v1
memory.limit_in_bytes (and memory.memsw.limit_in_bytes to the same value where the
kernel accounts swap, so the cap cannot be dodged by swapping), v2 memory.max (and
memory.swap.max 0). On exit, in all cases, it SIGKILLs what is left in it or in any
cgroup below it (a pool's per-slot cgroups), by pid, until they are empty, then removes
them bottom-up.

On v2 a cgroup that gives its children the memory controller may hold no process (the
"no internal processes" rule): where ours holds processes and is not the root (a
delegated scope, as `systemd-run --user --scope -p Delegate=yes` makes), this process
first moves into a leaf of its own, `<our cgroup>/<prefix>-harness-<pid>`, and writes
"+memory" to our cgroup's cgroup.subtree_control; it stays there (the scope's owner
removes both).

Needs a memory hierarchy we may write: root on v1 (/sys/fs/cgroup/memory), root or a
delegated subtree on v2. `unavailable_reason()` says why a cap cannot be made here.
Single-threaded use. Python 3 standard library only.
"""

import os
import secrets
import signal
import time

PROC_CGROUP = "/proc/self/cgroup"
PROC_MOUNTS = "/proc/self/mounts"


def own_memory_cgroup():
    """(mount point of the memory hierarchy, our cgroup's path in it, version 1 or 2), or
    None. v1 where a v1 memory hierarchy is mounted, else the cgroup2 mount."""
    v1 = v2 = None
    try:
        with open(PROC_MOUNTS) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 4:
                    continue
                if fields[2] == "cgroup" and "memory" in fields[3].split(",") and v1 is None:
                    v1 = fields[1]
                elif fields[2] == "cgroup2" and v2 is None:
                    v2 = fields[1]
        with open(PROC_CGROUP) as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except (OSError, ValueError):
        return None
    for _, controllers, path in lines:
        if v1 is not None and "memory" in controllers.split(","):
            return v1, path, 1
    if v1 is None and v2 is not None:
        for hierarchy, controllers, path in lines:
            if hierarchy == "0" and controllers == "":
                return v2, path, 2
    return None


def _own_directory(found):
    return os.path.join(found[0], found[1].lstrip("/"))


def unavailable_reason():
    """None if a MemoryCap can be made here, else why not (for skip messages)."""
    found = own_memory_cgroup()
    if found is None:
        return "no cgroup memory hierarchy (no v1 memory mount, no cgroup2 mount)"
    directory = _own_directory(found)
    if found[2] == 2:
        try:
            with open(os.path.join(directory, "cgroup.controllers")) as f:
                offered = f.read().split()
        except OSError as e:
            return f"our cgroup {directory} cannot be read: {e}"
        if "memory" not in offered:
            return f"our cgroup {directory} has no memory controller (cgroup.controllers)"
        for name in ("cgroup.subtree_control", "cgroup.procs"):
            if not os.access(os.path.join(directory, name), os.W_OK):
                return (f"our cgroup {directory} is not ours to write ({name}: needs root or "
                        f"a delegated subtree)")
    if not os.access(directory, os.W_OK):
        return f"our memory cgroup {directory} is not writable (needs root)"
    return None


def _v2_prepare_parent(directory, prefix):
    """Makes the v2 cgroup `directory` (ours) able to hold a capped child: "+memory" in
    its subtree_control, first moving this process into a leaf of its own when the
    directory holds processes and is not the root."""
    with open(os.path.join(directory, "cgroup.subtree_control")) as f:
        if "memory" in f.read().split():
            return
    is_root = not os.path.exists(os.path.join(directory, "cgroup.type"))
    if not is_root and _read_pids(os.path.join(directory, "cgroup.procs")):
        leaf = os.path.join(directory, f"{prefix}-harness-{os.getpid()}")
        os.makedirs(leaf, exist_ok=True)
        with open(os.path.join(leaf, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    with open(os.path.join(directory, "cgroup.subtree_control"), "w") as f:
        f.write("+memory")


class MemoryCap:
    """A memory cgroup with a limit; a context manager that always cleans up."""

    def __init__(self, limit_bytes, prefix="membench"):
        self.limit_bytes = int(limit_bytes)
        self.prefix = prefix
        self.path = None            # the cgroup directory, once created
        self.version = None         # 1 or 2, once created

    def __enter__(self):
        self.create()
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def create(self):
        found = own_memory_cgroup()
        reason = unavailable_reason()
        if reason:
            raise OSError(reason)
        self.version = found[2]
        parent = _own_directory(found)
        if self.version == 2:
            _v2_prepare_parent(parent, self.prefix)
        path = os.path.join(parent, f"{self.prefix}-{os.getpid()}-{secrets.token_hex(4)}")
        os.mkdir(path)
        self.path = path
        try:
            if self.version == 2:
                self._write("memory.max", self.limit_bytes)
                if os.path.exists(self._file("memory.swap.max")):
                    self._write("memory.swap.max", 0)
            else:
                self._write("memory.limit_in_bytes", self.limit_bytes)
                if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
                    self._write("memory.memsw.limit_in_bytes", self.limit_bytes)
        except OSError:
            self.remove()
            raise

    def command(self, argv, read_only_tree=False, wrapper=()):
        """argv prefixed so that its first process joins the cgroup before exec: a shell
        writes its own pid to cgroup.procs and execs argv (no pre-exec hook in Python).
        `read_only_tree`: then, in a mount namespace of its own (unshare(1)), it remounts
        the memory hierarchy read-only, as a Docker container sees it, before the exec.
        `wrapper` (a measuring parent such as tree_rusage) runs argv as its child: inside
        the cap on v1; outside it on v2, where a pool's driver that gives its slots the
        memory controller must be the only process in its cgroup (cgroup_v2_home.h)."""
        if self.version == 2:
            return [*wrapper, *self._joining(argv, read_only_tree)]
        return self._joining([*wrapper, *argv], read_only_tree)

    def _joining(self, argv, read_only_tree):
        if not read_only_tree:
            return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self._file("cgroup.procs"),
                    *argv]
        mount = own_memory_cgroup()[0]  # v1: the memory hierarchy; v2: the whole tree
        return ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                'echo $$ > "$0" && mount -o remount,bind,ro "$1" && shift && exec "$@"',
                self._file("cgroup.procs"), mount, *argv]

    # ---- counters (valid while the cgroup exists)

    def oom_kills(self):
        """OOM kills in the cgroup and every cgroup below it. On v1 a kill is counted in
        the cgroup whose limit was hit, so the cap's own counter holds the cap's kills;
        v2's memory.events of the cap counts its descendants' too (unless mounted with
        memory_localevents: then the sum below)."""
        if self.version == 2:
            if _mounted_with("memory_localevents"):
                return sum(_v2_event(d, "oom_kill") for d in self._tree())
            return _v2_event(self.path, "oom_kill")
        return sum(_oom_kill_count(d) for d in self._tree())

    def max_usage_bytes(self):
        """The cap's peak usage; v2 without memory.peak (before 5.19): the usage now."""
        if self.version == 2:
            for name in ("memory.peak", "memory.current"):
                if os.path.exists(self._file(name)):
                    return int(self._read(name))
            return 0
        return int(self._read("memory.max_usage_in_bytes"))

    def pids(self):
        """Every process in the cgroup or below it."""
        found = []
        for directory in self._tree():
            found += _read_pids(os.path.join(directory, "cgroup.procs"))
        return found

    # ---- clean-up

    def kill_all(self, timeout_s=30.0):
        """SIGKILLs, by pid, every process in the cgroup tree until none is left.
        Returns how many kills were sent; raises TimeoutError if they will not go."""
        sent = 0
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return sent
            if time.monotonic() > deadline:
                raise TimeoutError(f"processes {pids} stay in {self.path}")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    sent += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self, timeout_s=30.0):
        """Kills what is left and removes the cgroup and those below it. Idempotent."""
        if self.path is None or not os.path.isdir(self.path):
            self.path = None
            return
        self.kill_all(timeout_s)
        deadline = time.monotonic() + timeout_s
        for directory in reversed(self._tree()):  # children before parents
            while True:
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while exiting tasks are still charged
                    if time.monotonic() > deadline:
                        raise
                    self.kill_all(timeout_s)
                    time.sleep(0.05)
        self.path = None

    # ---- helpers

    def _tree(self):
        """The cgroup and all its descendants, parents first."""
        if self.path is None:
            return []
        found = []
        for directory, _, _ in os.walk(self.path):
            found.append(directory)
        return found

    def _file(self, name):
        return os.path.join(self.path, name)

    def _read(self, name):
        with open(self._file(name)) as f:
            return f.read().strip()

    def _write(self, name, value):
        with open(self._file(name), "w") as f:
            f.write(str(value))


def _read_pids(path):
    try:
        with open(path) as f:
            return [int(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _v2_event(directory, key):
    """A counter of a v2 cgroup's memory.events (0 when absent)."""
    try:
        with open(os.path.join(directory, "memory.events")) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except FileNotFoundError:
        pass
    return 0


def _mounted_with(option):
    """Whether the cgroup2 mount carries a mount option."""
    try:
        with open(PROC_MOUNTS) as f:
            return any(line.split()[2] == "cgroup2" and option in line.split()[3].split(",")
                       for line in f if len(line.split()) >= 4)
    except OSError:
        return False


def _oom_kill_count(directory):
    try:
        with open(os.path.join(directory, "memory.oom_control")) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except FileNotFoundError:
        pass
    return 0
