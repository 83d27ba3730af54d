#!/usr/bin/python3
"""Compares the pool of two commits, from spawn_bench.py runs of each made side by side.

    compare_spawn.py --before A1/spawn.json A2/spawn.json --after B1/spawn.json B2/spawn.json

Each spawn_bench run measures the pool against the floor (posix_spawn + waitpid from a
tiny C++ process) in the same cycles, so the pool/floor ratio of a run is what the
machine's load leaves comparable between runs; run the two commits' benchmarks
alternately (before, after, before, after) and compare those ratios, and the pool's
driver CPU per command, point by point. Prints a Markdown table: per point, the median
over a commit's runs and rounds, and after / before.
"""

import argparse
import json
import statistics


def records(paths):
    out = []
    for path in paths:
        with open(path) as f:
            out += json.load(f)["records"]
    return out


def point(r):
    return (r["kind"], r["rss_gib"], r["nofile"], r["threads"])


def label(key):
    kind, rss, nofile, threads = key
    return f"{kind}, RSS {rss:g} GiB, NOFILE {nofile}, {threads} thread{'s' * (threads > 1)}"


def pool_figures(recs):
    """Per point: pool/floor time ratios and the pool's driver CPU per command (µs)."""
    ratios, cpu = {}, {}
    floors = {(point(r), r["round"], r["rep"]): r for r in recs
              if r.get("method") == "floor" and r["kind"] in ("single", "threads")}
    for r in recs:
        if r.get("method") != "pool" or r["kind"] not in ("single", "threads"):
            continue
        key = point(r)
        floor = floors.get((key, r["round"], r["rep"]))
        if r["kind"] == "single":
            ratios.setdefault(key, []).append(r["ratio_median"])
        elif floor:
            # Threads: spawns/s of the floor's batch over the pool's (>1: pool slower).
            ratios.setdefault(key, []).append(
                (floor["count"] / floor["elapsed_s"]) / (r["count"] / r["elapsed_s"]))
        cpu.setdefault(key, []).append(r["driver_cpu_s"] / r["count"] * 1e6)
    return ratios, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", nargs="+", required=True, help="spawn.json of the old commit")
    ap.add_argument("--after", nargs="+", required=True, help="spawn.json of the new commit")
    args = ap.parse_args()
    before_ratio, before_cpu = pool_figures(records(args.before))
    after_ratio, after_cpu = pool_figures(records(args.after))
    med = statistics.median
    print("| point | pool / floor, before | after | driver CPU per command, before | after |"
          " after / before (CPU) |")
    print("|---|---|---|---|---|---|")
    for key in sorted(set(before_ratio) & set(after_ratio)):
        b_cpu, a_cpu = med(before_cpu[key]), med(after_cpu[key])
        print(f"| {label(key)} | {med(before_ratio[key]):.2f}x | {med(after_ratio[key]):.2f}x"
              f" | {b_cpu:.0f} µs | {a_cpu:.0f} µs | {a_cpu / b_cpu:.2f}x |")


if __name__ == "__main__":
    main()
