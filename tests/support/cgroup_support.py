"""Memory cgroups for the Python test suites (tests/reliability, tests/scons).

    with TestCgroup(limit_bytes=...) as cgroup:   # pytest.skip()s where none can be made
        ... Pool(memory_budget='auto', cgroup_parent=cgroup.path) ...
        assert not cgroup.children()              # the pool removed its cgroups
    # gone, with everything that still ran in it or below it

`TestCgroup` makes ``<this process's memory cgroup>/cgtest-py-<pid>-<random>`` (cgroup v1
or v2), and on exit SIGKILLs what runs in it or below it and removes it bottom-up.
`pool_cgroups()` lists the spawnpool-* cgroups under this process's memory cgroup;
`leaked_pool_cgroups()` those of them whose driver is gone (pools name theirs
spawnpool-<driver pid>-<random>), the leak check: another pool running at the same time
(a parallel test session's) owns a cgroup of a live driver.  Single-threaded use;
standard library only.
"""

import os
import secrets
import signal
import time

__all__ = ['TestCgroup', 'leaked_pool_cgroups', 'memory_cgroup_dir', 'pool_cgroups',
           'unavailable_reason']


def _mounts():
    with open('/proc/self/mountinfo') as f:
        for line in f:
            left, _, right = line.partition(' - ')
            fields, kind = left.split(), right.split()
            yield fields[3], fields[4], kind[0], kind[2] if len(kind) > 2 else ''


def memory_cgroup_dir():
    """(directory, version) of this process's memory cgroup, or (None, why not)."""
    try:
        with open('/proc/self/cgroup') as f:
            lines = [line.rstrip('\n').split(':', 2) for line in f]
        v1 = {p for _, controllers, p in lines if 'memory' in controllers.split(',')}
        v2 = [p for hid, controllers, p in lines if hid == '0' and controllers == '']
        for root, point, fstype, options in _mounts():
            if fstype == 'cgroup' and 'memory' in options.split(',') and v1:
                path = next(iter(v1))
                return os.path.join(point, os.path.relpath(path, root).lstrip('./')), 1
        for root, point, fstype, _ in _mounts():
            if fstype == 'cgroup2' and v2:
                path = os.path.join(point, os.path.relpath(v2[0], root).lstrip('./'))
                with open(os.path.join(path, 'cgroup.controllers')) as f:
                    if 'memory' in f.read().split():
                        return path, 2
    except (OSError, ValueError, IndexError):
        pass
    return None, 'no memory cgroup hierarchy for this process'


def unavailable_reason():
    """None if a TestCgroup can be made here, else why not (for skip messages)."""
    path, version = memory_cgroup_dir()
    if path is None:
        return version
    if not os.access(path, os.W_OK):
        return 'this process\'s memory cgroup %s is not writable (needs root or delegation)' % path
    return None


def pool_cgroups():
    """Names of the spawnpool-* cgroups directly under this process's memory cgroup."""
    path, _ = memory_cgroup_dir()
    try:
        return {n for n in os.listdir(path) if n.startswith('spawnpool-')} if path else set()
    except OSError:
        return set()


def _driver_alive(name):
    try:
        pid = int(name.split('-')[1])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def leaked_pool_cgroups(grace_s=5.0):
    """The spawnpool-* cgroups whose driver process is gone and that are still there after
    `grace_s` (the spawners of a killed driver remove them, which takes a moment)."""
    deadline = time.monotonic() + grace_s
    while True:
        leaked = {n for n in pool_cgroups() if not _driver_alive(n)}
        if not leaked or time.monotonic() >= deadline:
            return leaked
        time.sleep(0.1)


class TestCgroup:
    """A memory cgroup of the test's own, always removed (see the module's doc)."""

    def __init__(self, limit_bytes=None, holds_driver=False):
        """`holds_driver`: a driver will run in it (cgroup v2: then the driver enables
        memory for its pools itself, and the cgroup must not enable it first)."""
        self.limit_bytes = limit_bytes
        self.holds_driver = holds_driver
        self.path = None
        self.version = None

    def __enter__(self):
        import pytest
        reason = unavailable_reason()
        if reason:
            pytest.skip(reason)
        base, self.version = memory_cgroup_dir()
        if self.version == 2:
            base = self._leave_home(base)
        self.path = os.path.join(base, 'cgtest-py-%d-%s' % (os.getpid(), secrets.token_hex(4)))
        os.mkdir(self.path)
        if self.version == 2 and not self.holds_driver:   # what pools' cgroups below need
            _write(os.path.join(self.path, 'cgroup.subtree_control'), '+memory')
        if self.limit_bytes is not None:
            name = 'memory.limit_in_bytes' if self.version == 1 else 'memory.max'
            with open(os.path.join(self.path, name), 'w') as f:
                f.write(str(self.limit_bytes))
        return self

    def __exit__(self, *exc):
        self.remove()
        self._return_home()
        return False

    # cgroup v2 gives no controller to the children of a cgroup with processes (the root
    # cgroup aside): where `base` holds this process, it moves into base/cgtest-py-<pid>-home
    # first, as a driver moves into its leaf (worker_pool/cgroup/cgroup_v2_home.h), and
    # back at the end.
    _home = None

    def _leave_home(self, base):
        with open(os.path.join(base, 'cgroup.subtree_control')) as f:
            if 'memory' in f.read().split():
                return base
        parent = os.path.dirname(base)
        if not os.path.isfile(os.path.join(parent, 'cgroup.procs')):
            return base   # the root cgroup: exempt
        leaf = os.path.join(base, 'cgtest-py-%d-home' % os.getpid())
        os.mkdir(leaf)
        _write(os.path.join(leaf, 'cgroup.procs'), str(os.getpid()))
        self._home = (base, leaf)
        _write(os.path.join(base, 'cgroup.subtree_control'), '+memory')
        return base

    def _return_home(self):
        if self._home is None:
            return
        base, leaf = self._home
        self._home = None
        _write(os.path.join(base, 'cgroup.subtree_control'), '-memory')
        with open(os.path.join(leaf, 'cgroup.procs')) as f:
            for pid in f.read().split():
                _write(os.path.join(base, 'cgroup.procs'), pid)
        os.rmdir(leaf)

    def children(self):
        return sorted(n for n in os.listdir(self.path)
                      if os.path.isdir(os.path.join(self.path, n)))

    def join(self, pid):
        """Moves process `pid` into this cgroup."""
        with open(os.path.join(self.path, 'cgroup.procs'), 'w') as f:
            f.write(str(pid))

    def remove(self):
        if self.path is None or not os.path.isdir(self.path):
            return
        for directory, _, _ in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
            _empty(directory)
            for _ in range(200):
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:             # EBUSY: a killed process still exiting
                    time.sleep(0.01)


def _write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def _empty(directory, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(os.path.join(directory, 'cgroup.procs')) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
