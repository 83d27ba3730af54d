#!/usr/bin/python3
"""Turns spawn_bench.py and build_bench.py results into tables, target checks and plots.

usage: report.py [--results DIR] [--markdown FILE] [--img-dir DIR] [--print]

Reads DIR/spawn.json, DIR/build.json and DIR/build_pythons.json (any may be missing;
default DIR: build/bench), writes the Markdown report (default: DIR/benchmarks.md) and PNG
plots (default: DIR/img/), and with --print also prints the tables and target checks to
stdout. `bench_projects/run_benchmarks` writes docs/benchmarks.md and docs/img/ this way.
With build_pythons.json alone, only the report's interpreter section (report_pythons.py)
is replaced; the rest of an existing report stays as it is.

Targets get a verdict only from runs with enough rounds to carry one (MIN_ROUNDS, and for
the spawn benchmark not --quick); a quick run shows the numbers side by side, unjudged.

Plots need Debian's python3-matplotlib; without it the report is written without them.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import compare_spawn  # noqa: E402  (its before/after tables are kept)
import eta_bench  # noqa: E402  (its section is kept: eta_bench.py writes it)
import marked_section  # noqa: E402
import memory_report  # noqa: E402  (its section is kept: memory_report.py writes it)
import report_pythons  # noqa: E402  (the build benchmark's interpreter axis)

# Rounds a run needs before its targets are judged: single rounds on this shared machine
# move by 10-30 %, more than the margins the targets test.
MIN_ROUNDS = 3

METHOD_LABELS = {
    "floor": "floor (C++ posix_spawn)",
    "popen": "Popen (vfork)",
    "popen_fork": "Popen via fork()",
    "pickle_spawner": "pickle spawner (PR #3719)",
    "pool": "spawnpool",
}
METHOD_STYLE = {
    "floor": ("black", "o"), "popen": ("tab:blue", "s"), "popen_fork": ("tab:red", "v"),
    "pickle_spawner": ("tab:orange", "^"), "pool": ("tab:green", "D"),
}


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_ms(us):
    return "–" if us is None else (f"{us / 1000:.2f}" if us < 10000 else f"{us / 1000:.0f}")


def fmt_ratio(r):
    return "–" if r is None else (f"{r:.2f}x" if r < 10 else f"{r:.0f}x")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def gib(x):
    return f"{x:g} GiB"


# ---------------------------------------------------------------------------------------
# Spawn benchmark

class SpawnSummary:
    def __init__(self, data):
        self.data = data
        self.params = data["params"]
        self.methods = self.params["methods"]
        self.nofile_max = self.params["nofile_max"]
        recs = data["records"]
        self.single = [r for r in recs if r["kind"] == "single"]
        self.threads = [r for r in recs if r["kind"] == "threads"]
        self.handoff = [r for r in recs if r["kind"] == "handoff"]
        self.rss_points = sorted({r["rss_gib"] for r in self.single})
        self.nofiles = sorted({r["nofile"] for r in self.single})

    def cell(self, rss, nofile, method):
        """Medians over rounds at one point: per-command us, ratio, CPU us per command."""
        rs = [r for r in self.single
              if r["rss_gib"] == rss and r["nofile"] == nofile and r["method"] == method
              and r.get("group", "main") == ("fork" if method == "popen_fork" else "main")]
        if not rs:
            return None
        return {
            "median_us": med(r["median_us"] for r in rs),
            "mean_us": med(r["mean_us"] for r in rs),
            "ratio": med(r["ratio_median"] for r in rs),
            "ratio_min": min(r["ratio_median"] for r in rs),
            "ratio_max": max(r["ratio_median"] for r in rs),
            "ratio_of_means": med(r["ratio_of_means"] for r in rs),
            "driver_cpu_us": med(r["driver_cpu_s"] / r["count"] * 1e6 for r in rs),
            "helper_cpu_us": med(r["helper_cpu_s"] / r["count"] * 1e6 for r in rs),
            "rounds": len(rs),
            "commands": sum(r["count"] for r in rs),
            "vm_rss_kb": med(r["vm_rss_kb"] for r in rs),
        }

    def throughput(self, rss, threads, method):
        """Median aggregate spawns/s and median paired ratio to the floor's."""
        rs = [r for r in self.threads
              if r["rss_gib"] == rss and r["threads"] == threads and r["method"] == method]
        if not rs:
            return None
        rates, ratios = [], []
        for r in rs:
            rate = r["count"] / r["elapsed_s"]
            rates.append(rate)
            floor = [f for f in self.threads
                     if f["method"] == "floor" and f["rss_gib"] == rss and f["threads"] == threads
                     and f["round"] == r["round"] and f["rep"] == r["rep"]]
            if floor:
                ratios.append(rate / (floor[0]["count"] / floor[0]["elapsed_s"]))
        return {"rate": med(rates), "ratio": med(ratios),
                "ratio_min": min(ratios) if ratios else None,
                "driver_cpu_us": med(r["driver_cpu_s"] / r["count"] * 1e6 for r in rs),
                "batches": len(rs)}

    def per_command_table(self, nofile):
        header = ["driver RSS"] + [METHOD_LABELS[m] for m in self.methods]
        rows = []
        for rss in self.rss_points:
            row = [gib(rss)]
            for m in self.methods:
                c = self.cell(rss, nofile, m)
                if c is None:
                    row.append("–")
                elif m == "floor":
                    row.append(f"{fmt_ms(c['median_us'])} ms")
                else:
                    row.append(f"{fmt_ms(c['median_us'])} ms ({fmt_ratio(c['ratio'])})")
            rows.append(row)
        return table(header, rows)

    def ratio_spread_table(self):
        header = ["driver RSS", "RLIMIT_NOFILE"] + [
            METHOD_LABELS[m] for m in self.methods if m != "floor"]
        rows = []
        for rss in self.rss_points:
            for nofile in self.nofiles:
                row = [gib(rss), f"{nofile:,}"]
                for m in self.methods:
                    if m == "floor":
                        continue
                    c = self.cell(rss, nofile, m)
                    row.append("–" if c is None else
                               f"{fmt_ratio(c['ratio'])} [{c['ratio_min']:.2f}–"
                               f"{c['ratio_max']:.2f}] mean {fmt_ratio(c['ratio_of_means'])}")
                rows.append(row)
        return table(header, rows)

    def cpu_table(self, nofile):
        header = ["driver RSS"] + [METHOD_LABELS[m] for m in self.methods]
        rows = []
        for rss in self.rss_points:
            row = [gib(rss)]
            for m in self.methods:
                c = self.cell(rss, nofile, m)
                if c is None:
                    row.append("–")
                    continue
                text = f"{c['driver_cpu_us']:.0f}"
                if m in ("pool", "pickle_spawner"):
                    text += f" (+{c['helper_cpu_us']:.0f} helper)"
                row.append(text)
            rows.append(row)
        return table(header, rows)

    def throughput_tables(self):
        out = []
        thread_counts = sorted({r["threads"] for r in self.threads})
        for rss in sorted({r["rss_gib"] for r in self.threads}):
            header = ["threads"] + [METHOD_LABELS[m] for m in self.methods]
            rows = []
            for t in thread_counts:
                row = [str(t)]
                for m in self.methods:
                    c = self.throughput(rss, t, m)
                    if c is None:
                        row.append("–")
                    elif m == "floor":
                        row.append(f"{c['rate']:.0f}/s")
                    else:
                        row.append(f"{c['rate']:.0f}/s ({c['ratio']:.2f}x)")
                rows.append(row)
            out.append((rss, table(header, rows)))
        return out

    def handoff_table(self):
        if not self.handoff:
            return None
        placements = []
        for r in self.handoff:
            if r["placement"] not in placements:
                placements.append(r["placement"])
        rows = []
        for p in placements:
            rs = [r for r in self.handoff if r["placement"] == p]
            rows.append([p, f"{med(r['round_trip_us'] for r in rs):.0f} µs",
                         f"{fmt_ms(med(r['pool_median_us'] for r in rs))} ms",
                         f"{fmt_ms(med(r['floor_median_us'] for r in rs))} ms",
                         fmt_ratio(med(r["ratio_median"] for r in rs))])
        return table(["driver thread and spawner", "pool round trip, no process started",
                      "pool per command", "floor per command", "pool / floor"], rows)

    def targets(self):
        """(description, measured, met) for each spawn target."""
        out = []
        worst = None
        for rss in self.rss_points:
            for nofile in self.nofiles:
                c = self.cell(rss, nofile, "pool")
                if c and (worst is None or c["ratio"] > worst[2]):
                    worst = (rss, nofile, c["ratio"])
        for nofile in self.nofiles:
            for rss in self.rss_points:
                if nofile != min(self.nofiles) and nofile != self.nofile_max:
                    continue
                c = self.cell(rss, nofile, "pool")
                if c:
                    out.append((f"pool per-command cost <= 1.10x floor, RSS {gib(rss)}, "
                                f"RLIMIT_NOFILE {nofile:,}",
                                f"{c['ratio']:.2f}x [{c['ratio_min']:.2f}–"
                                f"{c['ratio_max']:.2f}]", c["ratio"] <= 1.10))
        for rss in sorted({r["rss_gib"] for r in self.threads}):
            for t in sorted({r["threads"] for r in self.threads}):
                c = self.throughput(rss, t, "pool")
                if c and c["ratio"] is not None:
                    out.append((f"pool throughput >= 0.9x floor, {t} thread(s), RSS {gib(rss)}",
                                f"{c['ratio']:.2f}x ({c['rate']:.0f}/s)", c["ratio"] >= 0.9))
        for rss in self.rss_points:
            pool = self.cell(rss, min(self.nofiles), "pool")
            popen = self.cell(rss, min(self.nofiles), "popen")
            if pool and popen:
                out.append((f"driver CPU per command, pool < Popen, RSS {gib(rss)}",
                            f"{pool['driver_cpu_us']:.0f} µs vs {popen['driver_cpu_us']:.0f} µs",
                            pool["driver_cpu_us"] < popen["driver_cpu_us"]))
        return out


def plot_spawn(summary, img_dir, plt):
    paths = []
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for m in summary.methods:
        color, marker = METHOD_STYLE[m]
        for nofile, style in ((min(summary.nofiles), "-"), (max(summary.nofiles), "--")):
            cells = [(rss, summary.cell(rss, nofile, m)) for rss in summary.rss_points]
            cells = [(rss, c) for rss, c in cells if c]
            if not cells:
                continue
            label = METHOD_LABELS[m] if style == "-" else None
            ax.plot([r for r, _ in cells], [c["median_us"] / 1000 for _, c in cells], style,
                    color=color, marker=marker, label=label)
            if m not in ("floor", "popen_fork"):
                ax2.plot([r for r, _ in cells], [c["ratio"] for _, c in cells], style,
                         color=color, marker=marker, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("driver RSS (GiB, every page touched)")
    ax.set_ylabel("wall time per command (ms, median)")
    ax.set_xticks(summary.rss_points)
    ax.set_title(f"Per-command cost vs driver RSS (solid: RLIMIT_NOFILE {min(summary.nofiles):,}, "
                 f"dashed: {max(summary.nofiles):,})", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax2.axhline(1.0, color="black", linewidth=1)
    ax2.axhline(1.10, color="gray", linewidth=1, linestyle=":")
    ax2.text(summary.rss_points[0], 1.102, "target 1.10x", fontsize=7, color="gray",
             va="bottom")
    ax2.set_xlabel("driver RSS (GiB)")
    ax2.set_ylabel("time / floor's time (median of per-cycle ratios)")
    ax2.set_xticks(summary.rss_points)
    ax2.set_title("Ratio to the floor, methods near it (fork path off the scale)", fontsize=9)
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(img_dir, "spawn_cost_vs_rss.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for m in summary.methods:
        color, marker = METHOD_STYLE[m]
        ys = [summary.cell(rss, min(summary.nofiles), m) for rss in summary.rss_points]
        pts = [(rss, c["driver_cpu_us"] / 1000) for rss, c in zip(summary.rss_points, ys) if c]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=color, marker=marker,
                label=METHOD_LABELS[m])
    ax.set_yscale("log")
    ax.set_xlabel("driver RSS (GiB)")
    ax.set_ylabel("driver process CPU per command (ms)")
    ax.set_xticks(summary.rss_points)
    ax.set_title("The driver's own CPU per command", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(img_dir, "spawn_driver_cpu.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    rss_list = sorted({r["rss_gib"] for r in summary.threads})
    if rss_list:
        fig, axes = plt.subplots(1, len(rss_list), figsize=(6 * len(rss_list), 4.5),
                                 squeeze=False)
        thread_counts = sorted({r["threads"] for r in summary.threads})
        for ax, rss in zip(axes[0], rss_list):
            for m in summary.methods:
                color, marker = METHOD_STYLE[m]
                cs = [summary.throughput(rss, t, m) for t in thread_counts]
                pts = [(t, c["rate"]) for t, c in zip(thread_counts, cs) if c]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=color,
                        marker=marker, label=METHOD_LABELS[m])
            ax.set_xscale("log", base=2)
            ax.set_xticks(thread_counts)
            ax.set_xticklabels([str(t) for t in thread_counts])
            ax.set_xlabel("concurrent threads")
            ax.set_ylabel("commands per second (all threads)")
            ax.set_title(f"Aggregate throughput, driver RSS {gib(rss)}", fontsize=9)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(img_dir, "spawn_throughput.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------
# Build benchmark

class BuildSummary:
    def __init__(self, data):
        self.data = data
        self.runs = data["runs"]
        self.variants = data["variants"]

    def cell(self, variant):
        rs = [r for r in self.runs if r["variant"] == variant and r.get("ok")]
        if not rs:
            return None
        return {k: med(r[k] for r in rs) for k in
                ("wall_s", "user_s", "sys_s", "cpu_s", "driver_cpu_s", "max_rss_kb")} | {
            "runs": len(rs), "walls": [r["wall_s"] for r in rs]}

    def paired_ratio(self, variant, base, key):
        """Median over rounds of variant/base for `key`, pairing runs of the same round."""
        ratios = self.paired_ratios(variant, base, key)
        return med(ratios)

    def paired_ratios(self, variant, base, key):
        return report_pythons.paired_ratios(self.runs, lambda r: r["variant"] == variant,
                                            lambda r: r["variant"] == base, key)

    def ratio_text(self, variant, base, key):
        return report_pythons.spread_text(self.paired_ratios(variant, base, key), fmt_ratio)

    def main_table(self):
        header = ["variant", "wall", "whole-tree CPU (user + sys)", "driver's own CPU",
                  "wall / stock [rounds]", "CPU / stock [rounds]", "runs", "outputs"]
        rows = []
        for v in self.variants:
            c = self.cell(v["name"])
            verified = all(r.get("verified") for r in self.runs if r["variant"] == v["name"])
            if c is None:
                rows.append([v["label"], "failed", "", "", "", "", "0", ""])
                continue
            rows.append([
                v["label"], f"{c['wall_s']:.1f} s",
                f"{c['cpu_s']:.1f} s ({c['user_s']:.1f} + {c['sys_s']:.1f})",
                "–" if c["driver_cpu_s"] is None or c["driver_cpu_s"] < 0 else
                f"{c['driver_cpu_s']:.1f} s",
                self.ratio_text(v["name"], "stock", "wall_s"),
                self.ratio_text(v["name"], "stock", "cpu_s"), str(c["runs"]),
                "verified" if verified else "NOT verified"])
        return table(header, rows)

    def targets(self):
        out = []
        names = {v["name"] for v in self.variants}
        sources = self.data.get("tree", {}).get("sources") or 0
        small = (f" [{sources:,}-source tree; the target is for >= 4,000]"
                 if sources < 4000 else "")
        if "pool" in names and "stock" in names:
            for key, what in (("wall_s", "wall"), ("cpu_s", "whole-tree CPU")):
                r = self.paired_ratio("pool", "stock", key)
                if r is not None:
                    out.append((f"build: --process-spawner {what} <= stock{small}",
                                self.ratio_text("pool", "stock", key), r <= 1.0))
        for pool, what in (("pool", ""), ("pool2g", " (pool with the same 2 GiB driver)")):
            if pool in names and "fork2g" in names:
                r = self.paired_ratio("fork2g", pool, "wall_s")
                if r is not None:
                    out.append((f"build: --process-spawner >= 3x faster wall than the fork "
                                f"path with a 2 GiB driver{what}{small}", f"{r:.2f}x faster",
                                r >= 3.0))
        return out


def plot_build(summary, img_dir, plt):
    variants = [v for v in summary.variants if summary.cell(v["name"])]
    if not variants:
        return []
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = range(len(variants))
    walls = [summary.cell(v["name"])["wall_s"] for v in variants]
    cpus = [summary.cell(v["name"])["cpu_s"] for v in variants]
    width = 0.38
    ax.bar([x - width / 2 for x in xs], walls, width, label="wall", color="tab:blue")
    ax.bar([x + width / 2 for x in xs], cpus, width, label="whole-tree CPU (user+sys)",
           color="tab:gray")
    for x, w in zip(xs, walls):
        ax.text(x - width / 2, w, f"{w:.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([v["short"] for v in variants], fontsize=8)
    ax.set_ylabel("seconds (median)")
    tree = summary.data.get("tree", {})
    ax.set_title(f"Full build of the {tree.get('preset', '')} tree "
                 f"({tree.get('sources', '?'):,} sources), -j{summary.data.get('jobs', 2)}",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(img_dir, "build_times.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def spawn_findings(spawn):
    """Bullet points computed from the spawn results."""
    out = []
    lo_nofile = min(spawn.nofiles)
    top, bottom = max(spawn.rss_points), min(spawn.rss_points)

    def ratios(method, nofile=None):
        vals = []
        for rss in spawn.rss_points:
            for nf in spawn.nofiles if nofile is None else [nofile]:
                c = spawn.cell(rss, nf, method)
                if c:
                    vals.append(c["ratio"])
        return vals

    fork_top = spawn.cell(top, lo_nofile, "popen_fork")
    fork_bottom = spawn.cell(bottom, lo_nofile, "popen_fork")
    pool_top = spawn.cell(top, lo_nofile, "pool")
    if fork_top and fork_bottom and pool_top:
        out.append(f"**fork() grows with the driver**: Popen via fork() costs "
                   f"{fmt_ms(fork_bottom['median_us'])} ms per command at {gib(bottom)} and "
                   f"{fmt_ms(fork_top['median_us'])} ms at {gib(top)} "
                   f"({fmt_ratio(fork_top['ratio'])} the floor). "
                   f"{fork_top['driver_cpu_us'] / 1000:.0f} ms of that is the driver's own "
                   f"CPU, copying its page tables into the child; the child then releases "
                   f"the copy again when it execs. The pool stays at "
                   f"{fmt_ms(pool_top['median_us'])} ms at {gib(top)}.")
    for method, name in (("pool", "spawnpool"), ("popen", "Popen (vfork)"),
                         ("pickle_spawner", "the pickle spawner")):
        vals = ratios(method)
        if vals:
            out.append(f"**{name}** costs {min(vals):.2f}–{max(vals):.2f}x the floor per "
                       f"command over all RSS and RLIMIT_NOFILE points (medians per point).")
    changes = []
    if len(spawn.nofiles) > 1:
        for m in spawn.methods:
            if m == "floor":
                continue
            diffs = []
            for rss in spawn.rss_points:
                a, b = spawn.cell(rss, min(spawn.nofiles), m), spawn.cell(rss, max(spawn.nofiles), m)
                if a and b and m != "popen_fork":
                    diffs.append(b["ratio"] - a["ratio"])
            if diffs:
                changes.append(f"{METHOD_LABELS[m]} {statistics.median(diffs):+.2f}")
        if changes:
            out.append(f"**RLIMIT_NOFILE {min(spawn.nofiles):,} → {max(spawn.nofiles):,}** "
                       f"changes little (median change of the ratio to the floor: "
                       f"{', '.join(changes)}): CPython 3.11's child and the pool's spawners "
                       f"both close fds with one close_range() call (strace shows "
                       f"`close_range(5, 2147483647, 0)` in Popen's child); nothing here "
                       f"loops over fd numbers.")
    pool_cpu = [spawn.cell(r, lo_nofile, "pool") for r in spawn.rss_points]
    popen_cpu = [spawn.cell(r, lo_nofile, "popen") for r in spawn.rss_points]
    pickle_cpu = [spawn.cell(r, lo_nofile, "pickle_spawner") for r in spawn.rss_points]
    if all(pool_cpu) and all(popen_cpu):
        out.append(f"**Driver CPU per command**: spawnpool "
                   f"{min(c['driver_cpu_us'] for c in pool_cpu):.0f}–"
                   f"{max(c['driver_cpu_us'] for c in pool_cpu):.0f} µs, Popen (vfork) "
                   f"{min(c['driver_cpu_us'] for c in popen_cpu):.0f}–"
                   f"{max(c['driver_cpu_us'] for c in popen_cpu):.0f} µs"
                   + (f", pickle spawner {min(c['driver_cpu_us'] for c in pickle_cpu):.0f}–"
                      f"{max(c['driver_cpu_us'] for c in pickle_cpu):.0f} µs"
                      if all(pickle_cpu) else "") +
                   f". The pool's spawners add {min(c['helper_cpu_us'] for c in pool_cpu):.0f}–"
                   f"{max(c['helper_cpu_us'] for c in pool_cpu):.0f} µs in their own "
                   f"processes, which run beside the driver instead of in it.")
    thread_counts = sorted({r["threads"] for r in spawn.threads})
    for rss in sorted({r["rss_gib"] for r in spawn.threads}):
        pool = [spawn.throughput(rss, t, "pool") for t in thread_counts]
        popen = [spawn.throughput(rss, t, "popen") for t in thread_counts]
        if all(pool) and all(popen) and len(thread_counts) > 1:
            out.append(f"**Threads, RSS {gib(rss)}**: the pool keeps "
                       f"{min(c['ratio'] for c in pool):.2f}–{max(c['ratio'] for c in pool):.2f}x "
                       f"the floor's throughput at {', '.join(map(str, thread_counts))} threads; "
                       f"Popen (vfork) falls to {min(c['ratio'] for c in popen):.2f}x once "
                       f"threads compete: most of its driver CPU per command is Python code "
                       f"under the GIL (Popen.__init__, _execute_child), so the threads take "
                       f"turns.")
    return out


def spawn_miss_explanation(spawn):
    """Why the pool misses the per-command target where it does (None: it does not)."""
    per_command = [t for t in spawn.targets() if "per-command" in t[0]]
    misses = [t for t in per_command if not t[2]]
    if not misses:
        return None
    where = "; ".join(t[0].split(", ", 1)[1] + f" {t[1]}" for t in misses)
    text = (f"**The pool misses the per-command target at {len(misses)} of "
            f"{len(per_command)} points** ({where}). ")
    rts = {}
    for r in spawn.handoff:
        rts.setdefault(r["placement"], []).append(r["round_trip_us"])
    if rts:
        text += ("It starts the program as the floor does (a vfork-style clone and exec); "
                 "the extra is the round trip between the "
                 "driver thread and its spawner, two futex wake-ups per command. Without "
                 "any process started that round trip takes "
                 + ", ".join(f"{med(v):.0f} µs with {k}" for k, v in rts.items()) +
                 " (next section). The rest is fixed work in the driver: converting "
                 "the arguments, encoding the request, releasing and taking the GIL, "
                 "building the Result, and with the same-CPU hand-off its affinity calls "
                 "(the notes under the throughput tables give that trade as measured).")
    return text


def build_findings(build):
    out = []
    stock = build.cell("stock")
    for name in ("pool", "poolsh", "pool2g", "pickle", "fork2g", "make"):
        c = build.cell(name)
        if not c or not stock:
            continue
        label = next(v["label"] for v in build.variants if v["name"] == name)
        out.append(f"**{label}**: wall {build.ratio_text(name, 'stock', 'wall_s')} and "
                   f"whole-tree CPU {build.ratio_text(name, 'stock', 'cpu_s')} of stock "
                   f"(median of per-round ratios [lowest–highest]).")
    fork, pool, pool2g = build.cell("fork2g"), build.cell("pool"), build.cell("pool2g")
    if fork and pool:
        out.append(f"The fork path with a 2 GiB driver takes "
                   f"{fork['wall_s'] / pool['wall_s']:.1f}x the wall time of "
                   f"--process-spawner" + (f" and {fork['wall_s'] / pool2g['wall_s']:.1f}x that "
                                           f"of --process-spawner with the same 2 GiB driver"
                                           if pool2g else "") +
                   f"; its driver alone burns {fork['driver_cpu_s']:.0f} s of CPU, mostly "
                   f"system time copying page tables.")
    return out


# ---------------------------------------------------------------------------------------
# The document

def machine_section(machine):
    ram = machine.get("ram_kb")
    lines = [f"- CPU: {machine.get('cpu', '?')}, `nproc` = {machine.get('nproc')}",
             f"- RAM: {ram / 1024 / 1024:.1f} GiB" if ram else "- RAM: ?",
             f"- kernel: {machine.get('kernel')}; {machine.get('glibc', '')}; "
             f"Python {machine.get('python')} (`/usr/bin/python3`)"]
    return "\n".join(lines)


def load_section(spawn, build):
    """What else the machine was doing: load averages around and during the runs."""
    lines = []
    for name, s in (("spawn benchmark", spawn), ("build benchmark", build)):
        if not s:
            continue
        m = s.data["machine"]
        recs = s.data.get("records") or s.data.get("runs") or []
        during = [r["loadavg_before"] for r in recs if "loadavg_before" in r]
        text = f"- {name}: 1/5/15-minute load average"
        if m.get("loadavg_at_start"):
            text += f" {' / '.join(m['loadavg_at_start'])} at the start,"
        text += f" {' / '.join(m.get('loadavg_at_end', []))} at the end"
        if during:
            text += (f"; 1-minute load {min(during):.1f}–{max(during):.1f} (median "
                     f"{statistics.median(during):.1f}) before its measurements")
        lines.append(text + f"; took {s.data['duration_s'] / 60:.0f} min.")
    return "\n".join(lines)


def targets_table(targets, judged=True):
    """targets: (what, measured, met); unjudged runs show the numbers without a verdict."""
    rows = [[what, measured, ("met" if ok else "**missed**") if judged else "not judged"]
            for what, measured, ok in targets]
    return table(["target", "measured (median of one run [lowest–highest round])", ""], rows)


def judged(summary):
    """Whether a summary's run has the rounds to judge its targets."""
    if summary is None:
        return True
    if isinstance(summary, SpawnSummary):
        p = summary.params
        return not p.get("quick") and p.get("rounds", 0) >= MIN_ROUNDS
    return summary.data.get("rounds", 0) >= MIN_ROUNDS


UNJUDGED = ("**Not judged: too few rounds.** This run measured each method or variant in "
            "one or two short rounds, side by side, on this machine as it is now. That "
            "shows the order of magnitude (what forking a grown driver costs, that the "
            "pool stays near the floor), but not whether a target's margin holds: single "
            "rounds on this shared machine move by 10–30 %, more than the margins. The "
            "verdicts come from the full run (`bench_projects/run_benchmarks`: 5 spawn "
            "rounds, 3 build rounds of the 4,160-source tree), in docs/benchmarks.md.")


def targets_block(groups):
    """The targets of each (summary, targets) group, one table per verdict state."""
    judged_rows = [t for s, ts in groups if judged(s) for t in ts]
    unjudged_rows = [t for s, ts in groups if not judged(s) for t in ts]
    out = []
    if judged_rows:
        out += [targets_table(judged_rows), ""]
    if unjudged_rows:
        out += [UNJUDGED, "", targets_table(unjudged_rows, judged=False), ""]
    return out


def render(spawn, build, img_rel, images, command, pythons=None):
    out = ["# Benchmarks", ""]
    out.append("Generated by `bench_projects/report.py` from the results of "
               "`bench_projects/run_benchmarks`; the prose around the tables is in "
               "`report.py` too. Every number is a median; ratios pair measurements made "
               "in the same round (see *Method*). The sections at the end have scripts of "
               "their own, each named in its section: the CPython comparison "
               "(`build_bench.py --pythons`), the memory benchmark (`memory_report.py`) and "
               "the before/after spawn tables (`compare_spawn.py`).")
    out.append("")
    machine = (spawn or build).data["machine"] if (spawn or build) else {}
    out += ["## Machine", "", machine_section(machine), "",
            "The machine is a 2-vCPU Firecracker VM shared with other work (test suites "
            "and builds of other sessions ran during these measurements; a load average "
            "above 2 means they were taking CPU from the benchmark):", "",
            load_section(spawn, build), "",
            "Single numbers therefore move by 10–30 % and build wall times by more. The "
            "spawn benchmark interleaves the methods command by command and takes medians "
            "of paired ratios to keep that noise out of the comparisons; the build "
            "benchmark rotates the variants and pairs ratios within a round. Whole-tree "
            "CPU is far less sensitive to the load than wall time.", ""]
    out += ["## Reproduce", "", "```sh",
            "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j2",
            "bench_projects/run_benchmarks            # full run, writes docs/benchmarks.md",
            "bench_projects/run_benchmarks --quick    # a few minutes, writes build/bench-quick/",
            "```", "", f"This report came from: `{command}`" + (
                f", source at commit {machine['commit']}"
                + (" plus uncommitted changes" if machine.get("uncommitted_changes") else "")
                if machine.get("commit") else "") + ".", ""]
    groups = [(x, x.targets()) for x in (spawn, build, pythons) if x]
    if any(ts for _, ts in groups):
        out += ["## Targets", ""] + targets_block(groups)
        if (spawn and spawn.data.get("notes")) or (build and build.data.get("notes")):
            out += ["Several margins are thinner than this one run shows: the rounds' spread "
                    "reaches a threshold in places, and the notes under the throughput and "
                    "build tables report other runs in which a target was missed, with the "
                    "cause.", ""]

    if spawn:
        p = spawn.params
        out += ["## Spawn benchmark", "",
                "`bench_projects/spawn_bench.py`. Every method starts the same static "
                "do-nothing program (`spawn_bench/noop.c`, `gcc -static -O2`) with "
                "`env={'PATH': ...}` and waits for it:", "",
                "- **floor**: `posix_spawn` + `waitpid` from a tiny C++ process "
                "(`spawn_bench/spawn_floor.cc`), no attributes;",
                "- **Popen (vfork)**: `subprocess.Popen(argv, env=env, close_fds=True).wait()`, "
                "SCons' own call, which CPython 3.11 runs through vfork;",
                "- **Popen via fork()**: the same with a no-op `preexec_fn`, which forces "
                "`fork()` (SCons on Python <= 3.9 and on macOS);",
                "- **pickle spawner (PR #3719)**: one Python spawner process per thread, "
                "fed pickled `(argv, env, cwd)` on its stdin, answering with the pickled "
                "return code (`spawn_bench/pickle_spawner.py`);",
                "- **spawnpool**: `spawnpool.Pool(slots=threads).run(argv, env=env)`.", "",
                "### Method", "",
                f"Each point (driver RSS, RLIMIT_NOFILE) of a round is a fresh worker "
                f"process that sets its soft RLIMIT_NOFILE, fills a bytearray of the RSS "
                f"(every page written), starts the pool and the spawners, and then runs "
                f"**one command at a time, cycling through the methods in a new random "
                f"order every cycle**, for {p['single_budget_s']:g} s and at least "
                f"{p['min_count']} cycles. The floor runs in its own small process, driven "
                f"one command at a time over a pipe and timed inside it. A method's ratio "
                f"is the median over cycles of (its time / the floor's time in the same "
                f"cycle); the tables give the median over {p['rounds']} rounds of the "
                f"per-round medians.", "",
                "Popen via fork() cycles with the floor in a group of its own (the two "
                "groups alternate in order between rounds). After a `fork()` the driver's "
                "page tables are write-protected for the child, so every page the Python "
                "driver writes next takes a copy-on-write fault; in-process methods cycled "
                "right after a fork paid for that (5–30 % at 4–8 GiB in trial runs) while "
                "the floor, in its own process, did not.", "",
                "Driver CPU is the driver process's CPU clock around each command "
                "(`CLOCK_PROCESS_CPUTIME_ID`: the user + sys total that "
                "`getrusage(RUSAGE_SELF)` reports, read exactly; getrusage splits it from "
                "tick samples and two readings a millisecond apart can lag), for the floor "
                "that of its C++ process. Helper CPU is what the pool's spawners or the "
                "pickle spawners used, from `/proc/PID/task/*/schedstat`; the commands' own "
                "CPU is in neither.", "",
                f"The thread axis runs batches of {p['budget_s']:g} s per method and thread "
                f"count ({p['reps']} per round, order rotated), counting commands finished by "
                f"all threads per second, paired with the floor's batch of the same round, "
                f"repetition and thread count; for the floor, the same number of threads "
                f"spawn inside the C++ process. The pool has one slot per thread; each "
                f"thread has its own pickle spawner.", ""]
        out += ["### Findings", ""] + [f"- {f}" for f in spawn_findings(spawn)] + [""]
        miss = spawn_miss_explanation(spawn)
        if miss:
            out += [miss, ""]
        if images.get("spawn_cost_vs_rss.png"):
            out += [f"![per-command cost vs driver RSS]({img_rel}/spawn_cost_vs_rss.png)", ""]
        for nofile in spawn.nofiles:
            out += [f"### Per-command wall time, one thread, RLIMIT_NOFILE {nofile:,}", "",
                    "Median ms per command (ratio to the floor, paired per cycle).", "",
                    spawn.per_command_table(nofile), ""]
        out += ["### Ratio to the floor: spread over rounds", "",
                "Median of per-cycle ratios [lowest – highest round], and the ratio of "
                "mean times (which counts the slow outliers).", "",
                spawn.ratio_spread_table(), ""]
        out += [f"### Driver CPU per command (µs), RLIMIT_NOFILE {min(spawn.nofiles):,}", "",
                "The driver process's own CPU; for the pool and the pickle spawners the "
                "CPU their helper processes spent per command is added in parentheses "
                "(the command itself is in neither).", "",
                spawn.cpu_table(min(spawn.nofiles)), ""]
        if images.get("spawn_driver_cpu.png"):
            out += [f"![driver CPU per command]({img_rel}/spawn_driver_cpu.png)", ""]
        tables = spawn.throughput_tables()
        if tables:
            out += ["### Aggregate throughput vs threads", "",
                    "Commands per second from all threads (ratio to the floor's rate with "
                    "the same number of threads, paired per batch). RLIMIT_NOFILE 1,024.", ""]
            for rss, t in tables:
                out += [f"Driver RSS {gib(rss)}:", "", t, ""]
            if images.get("spawn_throughput.png"):
                out += [f"![throughput vs threads]({img_rel}/spawn_throughput.png)", ""]
        if spawn.data.get("notes"):
            out += ["Notes:", ""] + [f"- {n}" for n in spawn.data["notes"]] + [""]
        ho = spawn.handoff_table()
        if ho:
            out += ["### Where the pool's extra cost comes from", "",
                    "The pool adds two wake-ups between processes per command (driver → "
                    "spawner with the request, spawner → driver with the reply) to what the "
                    "floor does. This diagnostic times the pool's round trip with no process "
                    "started (a program name not on PATH: the spawner answers at once), and "
                    "a real command next to the floor: first a pool whose hand-offs pin "
                    "the side they wake to the waker's CPU (`same_cpu_handoff=True`); then "
                    "the pool as shipped, without that hint, with the driver and "
                    "the spawner left to the scheduler, pinned together to one vCPU, and "
                    "pinned to two different vCPUs:", "", ho, "",
                    "A wake-up sent to another vCPU that is idle costs tens of microseconds "
                    "here: the VM boots with `cpuidle_haltpoll.force=1 "
                    "haltpoll.guest_halt_poll_ns=0`, so an idle vCPU halts at once and "
                    "waking it takes an IPI through the host. That is what the same-CPU hint "
                    "saves (off by default since 2026-12-03: builds measured faster "
                    "without it, docs/benchmarks.md \"The same-CPU hand-off in builds\"): "
                    "each hand-off wakes the other side where the waker runs: just before the futex wake "
                    "the driver pins the spawner to its own CPU (`sched_getcpu()`), and the "
                    "spawner pins the waiting driver thread to its CPU before the reply; "
                    "the waker sleeps right after, so that CPU is free at once, and the "
                    "woken side gives the pin back first thing, so the command runs "
                    "anywhere (docs/architecture.md, \"The CPU hint\"). "
                    "The rest is fixed work: argument conversion, request encoding, the "
                    "GIL release and the Result object in the driver.", ""]
    if build:
        d = build.data
        tree = d["tree"]
        out += ["## Build benchmark", "",
                f"`bench_projects/build_bench.py`: a full build of the `{tree['preset']}` "
                f"tree from `genscons.py` ({tree['sources']:,} C sources, "
                f"{tree['libraries']:,} libraries, {tree['programs']} programs; "
                f"{tree['scons_commands']:,} SCons commands) with `-j{d['jobs']}`, "
                f"{d['rounds']} round(s), variants rotated per round"
                + (f" (the slow fork variant in the first {d['fork_rounds']} only)"
                   if d.get("fork_rounds", d["rounds"]) < d["rounds"] else "") +
                ". Each build runs in a "
                "fresh copy of the tree under `tree_rusage` (`spawn_bench/tree_rusage.c`), "
                "which makes itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`) "
                "and reaps every process of the tree with `wait4()`, summing their "
                "rusage: spawner processes that are nobody's waited-for child (the pool's "
                "spawners if they outlive SCons, the pickle spawners) are counted too, "
                "which `/usr/bin/time` would miss. The driver's own CPU is read from "
                "`/proc/PID/stat` of the SCons process while it is a zombie. Every build's "
                "outputs are checked with `verify_outputs.py`. SCons runs with `HOME` "
                "pointing to an empty directory, so no `~/.scons/site_scons` or user "
                "site-packages of the caller's can change a variant. The 2 GiB variants "
                "include the time to touch the 2 GiB (about 1–2 s of CPU).", "",
                "Variants:", ""]
        for v in build.variants:
            out.append(f"- **{v['label']}**: {v['description']}")
        out += ["", build.main_table(), ""]
        out += [f"- {f}" for f in build_findings(build)] + [""]
        if images.get("build_times.png"):
            out += [f"![build time per variant]({img_rel}/build_times.png)", ""]
        if d.get("notes"):
            out += ["Notes:", ""] + [f"- {n}" for n in d["notes"]] + [""]
    text = "\n".join(out).rstrip() + "\n"
    if pythons:
        text = report_pythons.update(text, python_section(pythons))
    return text


def python_section(pythons):
    return report_pythons.render_section(
        pythons, lambda targets: "\n".join(targets_block([(pythons, targets)])).rstrip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(REPO, "build", "bench"))
    ap.add_argument("--markdown", help="report file (default: RESULTS/benchmarks.md)")
    ap.add_argument("--img-dir", help="PNG directory (default: img/ beside the report)")
    ap.add_argument("--command", default="bench_projects/run_benchmarks",
                    help="the command line to quote as this report's source")
    ap.add_argument("--print", action="store_true", help="print tables and targets")
    args = ap.parse_args()

    def load(name):
        path = os.path.join(args.results, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    spawn_data, build_data = load("spawn.json"), load("build.json")
    pythons_data = load("build_pythons.json")
    if not spawn_data and not build_data and not pythons_data:
        sys.exit(f"report: no spawn.json, build.json or build_pythons.json in {args.results}")
    spawn = SpawnSummary(spawn_data) if spawn_data else None
    build = BuildSummary(build_data) if build_data else None
    pythons = report_pythons.PythonsSummary(pythons_data) if pythons_data else None
    markdown = args.markdown or os.path.join(args.results, "benchmarks.md")
    if not spawn and not build:
        return update_python_section(markdown, pythons, args.print)
    img_dir = args.img_dir or os.path.join(os.path.dirname(os.path.abspath(markdown)), "img")
    os.makedirs(img_dir, exist_ok=True)

    images = {}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        paths = []
        if spawn:
            paths += plot_spawn(spawn, img_dir, plt)
        if build:
            paths += plot_build(build, img_dir, plt)
        images = {os.path.basename(p): p for p in paths}
    except ImportError:
        print("report: matplotlib missing (apt install python3-matplotlib); no plots",
              file=sys.stderr)
    img_rel = os.path.relpath(img_dir, os.path.dirname(os.path.abspath(markdown)))
    text = keep_other_sections(markdown, render(spawn, build, img_rel, images, args.command,
                                                pythons), pythons is None)
    with open(markdown, "w") as f:
        f.write(text)
    if args.print:
        groups = [(x, x.targets()) for x in (spawn, build, pythons) if x]
        if spawn:
            for nofile in spawn.nofiles:
                print(f"\nPer command, one thread, RLIMIT_NOFILE {nofile:,}:\n")
                print(spawn.per_command_table(nofile))
            for rss, t in spawn.throughput_tables():
                print(f"\nThroughput, driver RSS {gib(rss)}:\n")
                print(t)
            print("\nDriver CPU per command (µs):\n")
            print(spawn.cpu_table(min(spawn.nofiles)))
            ho = spawn.handoff_table()
            if ho:
                print("\nPool handoff diagnostic:\n")
                print(ho)
        if build:
            print("\nBuild:\n")
            print(build.main_table())
        if pythons:
            print_pythons(pythons)
        print("\nTargets:\n")
        print("\n".join(targets_block(groups)))
    print(f"report: wrote {markdown} and {len(images)} plot(s) in {img_dir}", file=sys.stderr)
    return 0


def keep_other_sections(markdown, text, keep_pythons):
    """text with the sections of the old report that this run has no results for: the
    memory benchmark's and its rows by environment (memory_report.py writes them), the
    before/after tables (compare_spawn.py), the ETA benchmark's two (eta_bench.py), and the
    CPython one without build_pythons.json."""
    if not os.path.exists(markdown):
        return text
    with open(markdown) as f:
        old = f.read()
    kept = [(memory_report.BEGIN, memory_report.END),
            (memory_report.ENV_BEGIN, memory_report.ENV_END),
            (compare_spawn.BEGIN, compare_spawn.END),
            (eta_bench.BEGIN, eta_bench.END),
            (eta_bench.MIXED_BEGIN, eta_bench.MIXED_END)]
    if keep_pythons:
        kept.append((report_pythons.BEGIN, report_pythons.END))
    for begin, end in kept:
        section = marked_section.find(old, begin, end)
        if section:
            text = marked_section.replace(text, begin, end, section)
    return text


def print_pythons(pythons):
    print("\nBuild, by CPython:\n")
    print(pythons.main_table())
    if pythons.interpreter_table():
        print()
        print(pythons.interpreter_table())
    print()
    for finding in pythons.findings():
        print("- " + finding)


def update_python_section(markdown, pythons, show):
    """Only build_pythons.json: replace (or add) that section of an existing report."""
    text = open(markdown).read() if os.path.exists(markdown) else "# Benchmarks\n"
    with open(markdown, "w") as f:
        f.write(report_pythons.update(text, python_section(pythons)))
    if show:
        print_pythons(pythons)
        print("\nTargets:\n")
        print("\n".join(targets_block([(pythons, pythons.targets())])))
    print(f"report: updated the CPython section of {markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
