#!/usr/bin/python3
"""What a cgroup per command costs a spawn: /bin/true through 1-slot pools with a memory
budget, side by side in one process, the only difference being where the command runs.

  percmd   a fresh cgroup per command below the slot's, entered by clone3(CLONE_INTO_CGROUP)
           (v2, kernel 5.7+; the default there)
  slot     the slot's own cgroup, joined by the child's write to cgroup.procs before exec
           (SPAWNPOOL_SLOT_CGROUPS_ONLY=1: what v1 does, and v2 before 5.7)
  nocg     no cgroup at all (SPAWNPOOL_DISABLE_CGROUPS=1): peaks from ru_maxrss

Every pool has memory_budget='64G' (admits everything), so the driver's admission work is
the same in each. Batches of --count commands cycle through the pools in a new random
order each round; each figure is the median over rounds of a batch's median per command,
and each ratio the median over rounds of the two batches' ratio in that round (the
machine is shared: side by side, never absolute).

usage: command_cgroup_cost.py [--pool-path DIR] [--rounds N] [--count N] [--command PATH]
"""

import argparse
import os
import random
import statistics
import sys

from admission_cost import batch  # median per command, the same measure

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MODES = {"percmd": {}, "slot": {"SPAWNPOOL_SLOT_CGROUPS_ONLY": "1"},
         "nocg": {"SPAWNPOOL_DISABLE_CGROUPS": "1"}}


def make_pool(spawnpool, env):
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)  # read when the pool and its spawners start
    try:
        return spawnpool.Pool(slots=1, memory_budget="64G")
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def where(pool, spawnpool):
    """The command's cgroup as /proc/self/cgroup says it (the v2 line, else v1 memory)."""
    r = pool.run(spawnpool.Command(["/bin/cat", "/proc/self/cgroup"],
                                   output=spawnpool.CAPTURE))
    lines = r.stdout.decode().splitlines()
    picked = [l for l in lines if l.startswith("0::")] or [l for l in lines if ":memory:" in l]
    return picked[0].split(":", 2)[2] if picked else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool-path", default=os.path.join(REPO, "build", "python"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--command", default="/bin/true")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.pool_path))
    import spawnpool

    command = spawnpool.Command([args.command], {"PATH": "/usr/bin:/bin"})
    pools = {name: make_pool(spawnpool, env) for name, env in MODES.items()}
    medians = {name: [] for name in pools}
    try:
        info = {name: (pool.run(command).memory_source, where(pool, spawnpool))
                for name, pool in pools.items()}
        for _ in range(args.rounds):
            order = list(pools)
            random.shuffle(order)
            for name in order:
                medians[name].append(batch(pools[name], command, args.count))
    finally:
        for pool in pools.values():
            pool.close()
    print("kernel %s; %s per command (median of %d rounds x %d commands):"
          % (os.uname().release, args.command, args.rounds, args.count))
    for name, values in medians.items():
        print("  %-7s %8.1f us  (memory_source %s; runs in %s)"
              % (name, statistics.median(values), info[name][0], info[name][1]))
    for name, base in (("percmd", "nocg"), ("slot", "nocg"), ("percmd", "slot")):
        ratios = [a / b for a, b in zip(medians[name], medians[base])]
        extra = [a - b for a, b in zip(medians[name], medians[base])]
        print("  %s / %s: %.3fx, %+.1f us (median of the rounds' ratios and differences)"
              % (name, base, statistics.median(ratios), statistics.median(extra)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
