"""A driver SIGKILLed in the middle of a build leaves nothing behind.

Each spawner holds one end of a lifeline socket whose other end only the driver has; when
the driver dies, however it dies, the kernel closes it, the spawner's watch thread sees
EOF, SIGKILLs its command's process group and exits. The segment is a memfd without a
name, so once they are gone no process maps it and nothing of it remains. Checked here with a real /usr/bin/python3
driver whose every slot runs a command that would otherwise sleep for 1000 s (with a
background child of its own, in the same process group).

With memory admission the spawners also kill everything in their slot's cgroup (a
grandchild that left the group and session too), and, having had no goodbye from the
driver, remove the pool's cgroups themselves: checked under a cgroup of the test's own.
"""

import json
import os
import signal
import time

import pytest

from reliability_support import (build_dir, cgroup_support, descendants_of, is_running,
                                 processes_mapping, reap, segment_mappings, shm_objects,
                                 wait_until)

DRIVER = r"""
import json, sys, threading
import spawnpool
slots, capture = int(sys.argv[1]), sys.argv[2] == "capture"
pool = spawnpool.Pool(slots=slots)

def build():
    try:
        pool.run(["sh", "-c", "sleep 1000 & exec sleep 1000"], capture=capture)
    except Exception:
        pass

for _ in range(slots if sys.argv[3] == "busy" else 0):
    threading.Thread(target=build, daemon=True).start()
print(json.dumps(pool.spawner_pids), flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("slots,mode,load", [(2, "capture", "busy"),
                                             (3, "passthrough", "busy"),
                                             (2, "capture", "idle")])
def test_sigkilled_driver_leaves_no_process_and_no_segment(driver_process, pids, slots,
                                                           mode, load):
    driver = driver_process(DRIVER, slots, mode, load)
    spawners = json.loads(driver.stdout.readline())
    pids.add(*spawners)
    assert len(spawners) == slots

    expected = 2 * slots if load == "busy" else 0  # two sleeps per command
    def commands():
        return [p for s in spawners for p in descendants_of(s) if is_running(p)]
    assert wait_until(lambda: len(commands()) == expected, timeout=10), \
        "the commands did not all start"
    started = commands()
    pids.add(*started)
    segments = segment_mappings(driver.pid)
    assert len(segments) == 1, segments
    segment = segments.pop()
    assert set(processes_mapping(segment)) == {driver.pid, *spawners}
    shm_before = shm_objects()

    os.kill(driver.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    everything = spawners + started
    gone = wait_until(lambda: not [p for p in everything if is_running(p)], timeout=1.0,
                      interval=0.005)
    elapsed = time.monotonic() - killed_at
    survivors = [p for p in everything if is_running(p)]
    assert gone, f"still running {elapsed:.2f} s after the driver's SIGKILL: {survivors}"
    driver.wait(timeout=5)
    # They were re-parented to this test (the subreaper): reap them by pid.
    for pid in everything:
        reap(pid, timeout=2)
    assert processes_mapping(segment) == []
    assert not shm_objects() - shm_before
    print(f"all {len(everything)} processes gone {elapsed * 1000:.0f} ms after SIGKILL")


MEMORY_DRIVER = r"""
import json, sys, threading
import spawnpool
slots, parent, helper = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pool = spawnpool.Pool(slots=slots, memory_budget="auto", cgroup_parent=parent)
line = helper + " 1000 > /dev/null; exec sleep 1000"
for _ in range(slots):
    threading.Thread(target=pool.run, args=(spawnpool.Command(["sh", "-c", line]),),
                     daemon=True).start()
print(json.dumps(pool.spawner_pids), flush=True)
threading.Event().wait()
"""


def test_sigkilled_driver_with_memory_leaves_no_cgroup(driver_process, pids):
    helper = os.path.join(build_dir(), "tests", "helpers", "double_fork_setsid")
    with cgroup_support.TestCgroup() as cgroup:
        driver = driver_process(MEMORY_DRIVER, 2, cgroup.path, helper)
        spawners = json.loads(driver.stdout.readline())
        pids.add(*spawners)
        [pool_dir] = cgroup.children()

        def in_slots():
            found = []
            for directory, _, files in os.walk(os.path.join(cgroup.path, pool_dir)):
                if "cgroup.procs" in files:
                    with open(os.path.join(directory, "cgroup.procs")) as f:
                        found += [int(p) for p in f.read().split()]
            return found
        # Each slot: the sleep, and the grandchild in a session of its own.
        assert wait_until(lambda: len(in_slots()) == 4, timeout=10), in_slots()
        started = in_slots()
        pids.add(*started)

        os.kill(driver.pid, signal.SIGKILL)
        everything = spawners + started
        gone = wait_until(lambda: not [p for p in everything if is_running(p)], timeout=5)
        assert gone, [p for p in everything if is_running(p)]
        assert wait_until(lambda: not cgroup.children(), timeout=5), cgroup.children()
        driver.wait(timeout=5)
        for pid in everything:
            reap(pid, timeout=2)
