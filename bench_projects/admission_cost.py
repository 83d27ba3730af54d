#!/usr/bin/python3
"""What memory-aware admission costs per command: the same tiny command through pools
with and without a memory budget, side by side in one process.

The command is spawn_bench's static no-op, started as ``sh -c "cc -O2 -c a.c -o a.o"``
would be (the no-op is linked as ``sh`` in a temporary directory), so the command key
parses a compile line as it would in a build. Three pools of one slot each:

  off        no memory budget (the default: no cgroup, no key, no history)
  on         memory_budget='64G' (admits everything) with per-slot cgroups and a history
  on-nocg    the same with SPAWNPOOL_DISABLE_CGROUPS=1 (key, admission, history; no cgroup)

Batches of --count commands cycle through the pools in a new random order each round;
each figure is the median over rounds of a batch's median per command, and each ratio the
median over rounds of on / off (the machine is shared: side by side, never absolute).

usage: admission_cost.py [--pool-path DIR] [--rounds N] [--count N]
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LINE = "cc -O2 -c src/module_17.c -o build/module_17.o"


def build_noop(directory):
    noop = os.path.join(directory, "sh")
    subprocess.run(["gcc", "-static", "-O2", "-o", noop,
                    os.path.join(HERE, "spawn_bench", "noop.c")], check=True)
    return noop


def make_pools(spawnpool, history):
    pools = {"off": spawnpool.Pool(slots=1),
             "on": spawnpool.Pool(slots=1, memory_budget="64G", history=history)}
    os.environ["SPAWNPOOL_DISABLE_CGROUPS"] = "1"     # read when a pool starts
    try:
        pools["on-nocg"] = spawnpool.Pool(slots=1, memory_budget="64G")
    finally:
        del os.environ["SPAWNPOOL_DISABLE_CGROUPS"]
    return pools


def batch(pool, command, count):
    """Median wall time per command, in microseconds."""
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        result = pool.run(command)
        times.append(time.perf_counter_ns() - start)
        if result.returncode != 0:
            sys.exit("%s: the command failed: %r" % (os.path.basename(sys.argv[0]), result))
    return statistics.median(times) / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool-path", default=os.path.join(REPO, "build", "python"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--count", type=int, default=300)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.pool_path))
    import spawnpool

    with tempfile.TemporaryDirectory(prefix="admission-cost-") as work:
        command = spawnpool.Command([build_noop(work), "-c", LINE], {"PATH": "/usr/bin:/bin"})
        pools = make_pools(spawnpool, os.path.join(work, "history.sqlite"))
        sources = {name: pool.run(command).memory_source for name, pool in pools.items()}
        medians = {name: [] for name in pools}
        try:
            for _ in range(args.rounds):
                order = list(pools)
                random.shuffle(order)
                for name in order:
                    medians[name].append(batch(pools[name], command, args.count))
        finally:
            for pool in pools.values():
                pool.close()
    print("per command (median of %d rounds x %d commands, memory source):"
          % (args.rounds, args.count))
    for name, values in medians.items():
        print("  %-8s %8.1f us  (%s)" % (name, statistics.median(values), sources[name]))
    for name in ("on", "on-nocg"):
        ratios = [a / b for a, b in zip(medians[name], medians["off"])]
        extra = [a - b for a, b in zip(medians[name], medians["off"])]
        print("  %s / off: %.3fx, +%.1f us (median of the rounds' ratios and differences)"
              % (name, statistics.median(ratios), statistics.median(extra)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
