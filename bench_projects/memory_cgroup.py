"""A memory cap for one benchmark build: a cgroup v1 memory cgroup under our own.

    with MemoryCap(limit_bytes=3584 << 20) as cap:
        proc = subprocess.Popen(cap.command(["scons", "-j8"]))   # its first process joins
        proc.wait()
        kills = cap.oom_kills()
    # the cgroup is gone, and so is every process that was left in it

`MemoryCap` creates `<our memory cgroup>/<prefix>-<pid>-<random>`, sets
memory.limit_in_bytes (and memory.memsw.limit_in_bytes to the same value where the
kernel accounts swap, so the cap cannot be dodged by swapping), and on exit, in all
cases, SIGKILLs what is left in it or in any cgroup below it (a pool's per-slot cgroups),
by pid, until they are empty, then removes them bottom-up.

Only cgroup v1 with a writable memory hierarchy is supported (this project's machines:
root, /sys/fs/cgroup/memory). `unavailable_reason()` says why a cap cannot be made here.
Single-threaded use. Python 3 standard library only.
"""

import os
import secrets
import signal
import time

PROC_CGROUP = "/proc/self/cgroup"
PROC_MOUNTS = "/proc/self/mounts"


def own_memory_cgroup():
    """(mount point of the v1 memory hierarchy, our cgroup's path in it), or None."""
    mount = None
    try:
        with open(PROC_MOUNTS) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 4 and fields[2] == "cgroup" and "memory" in fields[3].split(","):
                    mount = fields[1]
                    break
        if mount is None:
            return None
        with open(PROC_CGROUP) as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(","):
                    return mount, path
    except (OSError, ValueError):
        return None
    return None


def unavailable_reason():
    """None if a MemoryCap can be made here, else why not (for skip messages)."""
    found = own_memory_cgroup()
    if found is None:
        return "no cgroup v1 memory hierarchy (only cgroup v1 is supported)"
    directory = os.path.join(found[0], found[1].lstrip("/"))
    if not os.access(directory, os.W_OK):
        return f"our memory cgroup {directory} is not writable (needs root)"
    return None


class MemoryCap:
    """A memory cgroup with a limit; a context manager that always cleans up."""

    def __init__(self, limit_bytes, prefix="membench"):
        self.limit_bytes = int(limit_bytes)
        self.prefix = prefix
        self.path = None            # the cgroup directory, once created

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
        parent = os.path.join(found[0], found[1].lstrip("/"))
        path = os.path.join(parent, f"{self.prefix}-{os.getpid()}-{secrets.token_hex(4)}")
        os.mkdir(path)
        self.path = path
        try:
            self._write("memory.limit_in_bytes", self.limit_bytes)
            if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
                self._write("memory.memsw.limit_in_bytes", self.limit_bytes)
        except OSError:
            self.remove()
            raise

    def command(self, argv, read_only_tree=False):
        """argv prefixed so that its first process joins the cgroup before exec: a shell
        writes its own pid to cgroup.procs and execs argv (no pre-exec hook in Python).
        `read_only_tree`: then, in a mount namespace of its own (unshare(1)), it remounts
        the memory hierarchy read-only, as a Docker container sees it, before the exec."""
        if not read_only_tree:
            return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self._file("cgroup.procs"),
                    *argv]
        mount = own_memory_cgroup()[0]
        return ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                'echo $$ > "$0" && mount -o remount,bind,ro "$1" && shift && exec "$@"',
                self._file("cgroup.procs"), mount, *argv]

    # ---- counters (valid while the cgroup exists)

    def oom_kills(self):
        """OOM kills in the cgroup and every cgroup below it. On v1 a kill is counted in
        the cgroup whose limit was hit, so the cap's own counter holds the cap's kills."""
        return sum(_oom_kill_count(d) for d in self._tree())

    def max_usage_bytes(self):
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
