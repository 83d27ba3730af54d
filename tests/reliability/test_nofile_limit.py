"""A driver with a high RLIMIT_NOFILE.

A driver may raise its soft RLIMIT_NOFILE to the hard limit (20,000 on these machines).
Commands must see the limits the driver had when the pool started (spawners inherit
them and pass them on), and a spawn must cost no more than at 1,024: descriptors are
closed with one close_range() call, never a loop over fd numbers (stubprocess' loop up
to 1M descriptors cost it minutes). With SPAWNPOOL_DISABLE_CLOSE_RANGE=1 in the pool's
environment the spawner skips close_range and relies on keeping all of its own
descriptors close-on-exec; commands must still see nothing beyond 0, 1 and 2.

One driver process starts two pools, the first at a soft limit of 1,024 and the second
after raising it to the hard limit, and times /bin/true in both in alternating batches,
so that load from other processes hits both alike. The driver also holds inheritable
descriptors (one just below the limit) that must never reach a command.
"""

import json
import os
import re
import resource
import shutil
import subprocess

import pytest

from reliability_support import PYTHON

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
HIGH = HARD if HARD != resource.RLIM_INFINITY else 20_000

DRIVER = r"""
import json, os, resource, statistics, sys, time
import spawnpool
low, high, fd_list = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

# The command tests every fd number below its limit with stat(2), which opens nothing
# (listing /proc/self/fd would show the listing's own descriptor), and writes the open
# ones to a file only at the end: with the redirection, dash keeps a saved copy of fd 1.
CHECK = ('n=$(ulimit -n); fd=0; found=""; while [ $fd -lt $n ]; do '
         '[ -e /proc/$$/fd/$fd ] && found="$found $fd"; fd=$((fd+1)); done; '
         'echo $found > "$0"')

def descriptors(pool, capture):
    pool.run(["/bin/sh", "-c", CHECK, fd_list], capture=capture)
    with open(fd_list) as f:
        return sorted(int(fd) for fd in f.read().split())

pools, seen = {}, {}
for name, soft in (("low", low), ("high", high)):
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    # Inheritable descriptors, one near the top: a leak would show in the commands.
    leak = os.open("/dev/null", os.O_RDONLY)
    os.set_inheritable(leak, True)
    os.dup2(leak, soft - 1, inheritable=True)
    pool = pools[name] = spawnpool.Pool(slots=1)
    limits = pool.run(["/bin/sh", "-c", "ulimit -Sn; ulimit -Hn"], capture=True).stdout.split()
    seen[name] = {"limits": [int(x) for x in limits],
                  "fds_captured": descriptors(pool, True),
                  "fds_passthrough": descriptors(pool, False)}

times = {"low": [], "high": []}
for _ in range(int(sys.argv[4])):
    for name in ("low", "high"):
        for _ in range(20):
            started = time.perf_counter()
            pools[name].run(["/bin/true"])
            times[name].append(time.perf_counter() - started)
for pool in pools.values():
    pool.close()
for name in times:
    seen[name]["median_ms"] = statistics.median(times[name]) * 1000
print(json.dumps(seen))
"""


@pytest.mark.parametrize("close_range", ["close_range", "cloexec only"])
def test_high_nofile_limit(driver_process, tmp_path, close_range):
    env = dict(os.environ)
    env.pop("SPAWNPOOL_DISABLE_CLOSE_RANGE", None)
    if close_range == "cloexec only":
        env["SPAWNPOOL_DISABLE_CLOSE_RANGE"] = "1"
    driver = driver_process(DRIVER, 1024, HIGH, tmp_path / "fds", 10, env=env)
    out, _ = driver.communicate(timeout=120)
    assert driver.returncode == 0
    seen = json.loads(out)
    print(json.dumps(seen))
    for name, soft in (("low", 1024), ("high", HIGH)):
        assert seen[name]["limits"] == [soft, HARD], seen[name]
        assert seen[name]["fds_captured"] == [0, 1, 2], seen[name]
        assert seen[name]["fds_passthrough"] == [0, 1, 2], seen[name]
    low, high = seen["low"]["median_ms"], seen["high"]["median_ms"]
    # Generous: a loop over 20,000 descriptors would add milliseconds to a ~1 ms spawn.
    assert high <= 1.5 * low + 0.5, f"median {high:.2f} ms at {HIGH} vs {low:.2f} ms at 1024"


STRACED = r"""
import spawnpool
with spawnpool.Pool(slots=1) as pool:
    for _ in range(3):
        pool.run(["/bin/true"])
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("disabled", [False, True])
def test_close_range_per_command_only_when_enabled(tmp_path, disabled):
    """The variable really switches the per-command close_range off (and only that)."""
    log = tmp_path / "strace.log"
    env = dict(os.environ)
    env.pop("SPAWNPOOL_DISABLE_CLOSE_RANGE", None)
    if disabled:
        env["SPAWNPOOL_DISABLE_CLOSE_RANGE"] = "1"
    subprocess.run(["strace", "-f", "-o", str(log), "-e", "trace=close_range,execve",
                    PYTHON, "-c", STRACED], env=env, check=True, timeout=60,
                   stdout=subprocess.DEVNULL)
    lines = log.read_text().splitlines()
    commands = {line.split()[0] for line in lines if 'execve("/bin/true"' in line}
    assert len(commands) == 3
    closing = {line.split()[0] for line in lines
               if re.search(r"close_range\(3, 4294967295", line)}
    assert (commands <= closing) != disabled, "\n".join(lines)
