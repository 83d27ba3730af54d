#!/usr/bin/python3
"""Compares the pool of two commits, from spawn_bench.py runs of each made side by side.

    compare_spawn.py --before A1/spawn.json A2/spawn.json --after B1/spawn.json B2/spawn.json
    compare_spawn.py ... --markdown docs/benchmarks.md   # adds the table to the report's
                                                         # before/after section

Each spawn_bench run measures the pool against the floor (posix_spawn + waitpid from a
tiny C++ process) in the same cycles, so the pool/floor ratio of a run is what the
machine's load leaves comparable between runs; run the two commits' benchmarks
alternately (before, after, before, after) and compare those ratios, and the pool's
driver CPU per command, point by point. Prints a Markdown table: per point, the median
over a commit's runs and rounds, and after / before. With --markdown, the table (and the
runs' commits, load and parameters) goes into the marked "before and after" section of
that report: one table per comparison, a new one replacing the one of the same title.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marked_section  # noqa: E402

BEGIN = "<!-- compare_spawn: tables made by bench_projects/compare_spawn.py --markdown -->"
END = "<!-- /compare_spawn -->"
HEADING = "## Spawn benchmark, before and after"


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


def table(before, after):
    before_ratio, before_cpu = pool_figures(records(before))
    after_ratio, after_cpu = pool_figures(records(after))
    med = statistics.median
    out = ["| point | pool / floor, before | after | driver CPU per command, before | after |"
           " after / before (CPU) |", "|---|---|---|---|---|---|"]
    for key in sorted(set(before_ratio) & set(after_ratio)):
        b_cpu, a_cpu = med(before_cpu[key]), med(after_cpu[key])
        out.append(f"| {label(key)} | {med(before_ratio[key]):.2f}x | {med(after_ratio[key]):.2f}x"
                   f" | {b_cpu:.0f} µs | {a_cpu:.0f} µs | {a_cpu / b_cpu:.2f}x |")
    return "\n".join(out)


def runs_text(paths):
    """Commit (where recorded), load at start and end, and the parameters of the runs."""
    out = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        machine = data["machine"]
        out.append(f"{machine.get('commit', 'commit not recorded')} (load "
                   f"{machine['loadavg_at_start'][0]} -> {machine['loadavg_at_end'][0]})")
    params = data["params"]
    return ", ".join(out), (f"{params['rounds']} rounds, {params['reps']} batches, RSS "
                            f"{'/'.join(f'{r:g}' for r in params['rss_gib'])} GiB, threads "
                            f"{'/'.join(map(str, params['threads']))}")


def update(markdown, title, before, after):
    with open(markdown) as f:
        text = f.read()
    old = marked_section.find(text, BEGIN, END) or ""
    body = old.removeprefix(BEGIN).removesuffix(END + "\n")
    # The tables kept: every "### title" part but the heading and the one being replaced.
    parts = [p.strip() for p in body.split("\n### ")[1:] if not p.startswith(title + "\n")]
    before_runs, params = runs_text(before)
    after_runs, _ = runs_text(after)
    parts.append(f"{title}\n\nRuns alternated, before then after, {len(before)} of each "
                 f"({params}): before {before_runs}; after {after_runs}. Medians over all "
                 f"runs and rounds; `pool / floor` is the pool's time over the floor's in "
                 f"the same run (per command for one thread, spawns/s for threads).\n\n"
                 f"{table(before, after)}")
    section = "\n".join([BEGIN, HEADING, "", "### " + "\n\n### ".join(parts), END])
    with open(markdown, "w") as f:
        f.write(marked_section.replace(text, BEGIN, END, section + "\n"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", nargs="+", required=True, help="spawn.json of the old commit")
    ap.add_argument("--after", nargs="+", required=True, help="spawn.json of the new commit")
    ap.add_argument("--markdown", help="report to add the table to")
    ap.add_argument("--title", default="Before and after",
                    help="the table's heading (name the two commits in it)")
    args = ap.parse_args()
    if args.markdown:
        update(args.markdown, args.title, args.before, args.after)
    else:
        print(table(args.before, args.after))


if __name__ == "__main__":
    main()
