"""Shared fixtures of the reliability scenarios: process bookkeeping through /proc,
pools that are always closed, and cleanup by pid of everything a test starts.

Run with ``PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/reliability``.

This machine's PID 1 does not reap orphans, so the pytest process makes itself a child
subreaper (PR_SET_CHILD_SUBREAPER): a command's grandchild, or a spawner whose driver was
SIGKILLed, is re-parented to us and reaped here by pid instead of lingering as a zombie.
"""

import ctypes
import os
import subprocess

import pytest

import spawnpool
import gc

from reliability_support import (PR_SET_CHILD_SUBREAPER, PYTHON, SHM, children_of,
                                 is_running, kill_and_reap, libc, proc_stat, reap,
                                 segment_fds, segment_mappings, shm_objects, wait_until,
                                 zombies_among)


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="session", autouse=True)
def subreaper():
    """Makes pytest the subreaper of everything it starts; reaps leftover zombies by pid."""
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) failed: "
                    + os.strerror(ctypes.get_errno()))
    yield
    for pid in zombies_among(children_of(os.getpid())):
        reap(pid, timeout=0)


@pytest.fixture(autouse=True)
def no_segment_left():
    """Fails a test that leaves a pool segment in this process (a descriptor or a mapping
    of the memfd), or a spawnpool object in /dev/shm (which it then removes).

    Only builds from before the memfd segment named theirs in /dev/shm; other suites may
    run them at the same time, owning a name for the milliseconds of their pool's start,
    so only objects that outlive the test by a second count."""
    before = shm_objects()
    fds_before, maps_before = segment_fds(), segment_mappings()
    yield
    gc.collect()  # a closed pool keeps its segment until the object goes
    fds_left = set(segment_fds()) - set(fds_before)
    maps_left = segment_mappings() - maps_before
    assert not fds_left and not maps_left, \
        f"pool segments left in this process: fds {sorted(fds_left)}, mappings {maps_left}"
    left = wait_until(lambda: not (shm_objects() - before), timeout=1.0)
    if not left:
        leaked = shm_objects() - before
        for name in leaked:
            try:
                os.unlink(os.path.join(SHM, name))
            except FileNotFoundError:
                pass
        pytest.fail(f"shared-memory objects left in {SHM}: {sorted(leaked)}")


class PidTracker:
    """Pids a test started or found; killed and reaped at teardown, pass or fail."""

    def __init__(self):
        self.processes = []

    def add(self, *pids):
        for pid in pids:
            st = proc_stat(int(pid))
            if st is not None:
                self.processes.append((int(pid), st[3]))

    def cleanup(self):
        kill_and_reap(self.processes)


@pytest.fixture
def pids():
    tracker = PidTracker()
    yield tracker
    tracker.cleanup()


@pytest.fixture
def make_pool(pids):
    """Factory of in-process pools; each is closed at teardown and its spawners checked."""
    pools = []

    def make(slots=2, **kwargs):
        pool = spawnpool.Pool(slots=slots, **kwargs)
        pools.append((pool, list(pool.spawner_pids)))
        pids.add(*pool.spawner_pids)
        return pool

    yield make
    for pool, spawners in pools:
        pool.close()
        for pid in spawners:
            assert not is_running(pid), f"spawner {pid} still runs after close()"


@pytest.fixture
def driver_process(pids):
    """Factory: starts `/usr/bin/python3 -c code args...` as a separate driver process,
    tracked by pid; its stdout is a text pipe."""
    started = []

    def start(code, *args, env=None, **kwargs):
        proc = subprocess.Popen([PYTHON, "-c", code, *map(str, args)], env=env,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, text=True, **kwargs)
        started.append(proc)
        pids.add(proc.pid)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
