"""Fixtures for the spawnpool module tests: leak checks around every test.

Run as: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python
Every test here is checked afterwards for leaks (the ``no_leaks`` fixture, autouse):
the same open fds, the same child processes (this pytest process may have children
from elsewhere; a test must not add any, zombie or alive), no process left that carries
the test's marker variable (spawners and commands run with the driver's environment
inherit it), no pool segment left here (no descriptor or mapping of the memfd
/memfd:spawnpool-segment), and no /dev/shm/spawnpool-* entry appearing.
"""

import gc
import os

import pytest

from spawnpool_test_support import (MARKER, SEGMENT_MEMFD, children_of, describe, open_fds,
                                    processes_with_env, shm_entries, wait_until)


@pytest.fixture(autouse=True)
def no_leaks(monkeypatch):
    marker = f"{MARKER}={os.getpid()}"
    monkeypatch.setenv(MARKER, str(os.getpid()))
    fds_before = open_fds()
    children_before = children_of(os.getpid(), with_zombies=True)
    shm_before = shm_entries()
    yield
    # A closed pool keeps its segment until the object goes, and a test's exception
    # tracebacks keep its frame (and the pool) in a reference cycle.
    gc.collect()
    problems = []
    fds_after = open_fds()
    if fds_after.keys() != fds_before.keys():
        added = {fd: t for fd, t in fds_after.items() if fd not in fds_before}
        removed = {fd: t for fd, t in fds_before.items() if fd not in fds_after}
        problems.append(f"open fds changed: added {added}, removed {removed}")
    children_after = children_of(os.getpid(), with_zombies=True)
    if children_after != children_before:
        problems.append("children changed: " + "; ".join(
            describe(p) for p in set(children_after) ^ set(children_before)))
    wait_until(lambda: not processes_with_env(marker), timeout=5)
    left = processes_with_env(marker)
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
    wait_until(lambda: not (shm_entries() - shm_before), timeout=3)
    new_shm = shm_entries() - shm_before
    if new_shm:
        problems.append(f"/dev/shm entries left: {sorted(new_shm)}")
    assert not problems, "\n".join(problems)
