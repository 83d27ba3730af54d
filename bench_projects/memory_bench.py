#!/usr/bin/python3
"""Memory benchmark: a heavy-tailed build inside a memory cap, with each way of scheduling.

The tree (memory_tree.py) has 240 "compiles" whose peaks run from 8 MiB to 2 GiB
(p50 ~100 MiB, p99 ~1.5 GiB), clustered in one directory, each holding its memory while
it sleeps. Every build runs inside a fresh cgroup v1 memory cgroup (memory_cgroup.py)
capped so that stock `scons -j8` is OOM-killed, under spawn_bench/tree_rusage (wall time,
CPU, every process reaped). Variants:

  stock-jN    stock SCons at a static -jN, N = 1..8 (the ladder; stock-j8 is "stock -j8")
  pool-j8     scons --process-spawner -j8 (no memory admission)
  admit-cold  scons --process-spawner --process-spawner-memory=auto -j8, a fresh history
              path each run
  admit-warm  the same with one history path kept across runs (primed by one build first)
  admit-warm-ro  admit-warm inside a mount namespace whose cgroup tree is read-only (as
              in a Docker container): no slot cgroups, its own kept history

Phase 1 runs the ladder (--rounds rounds, order rotated). The fastest static -j that never
failed there is the reference. Phase 2 runs --admission-runs rounds of stock-j8, the
reference, pool-j8, admit-cold and admit-warm (rotated), so each pool variant's wall time
is paired with the reference of its own round. Pool variants whose options the plugin does
not have yet are skipped with the reason. Every run reports: exit status, OOM kills (the
cap cgroup's memory.oom_control), lost outputs (every expected output exists and is
right), wall time, CPU, the cap cgroup's peak usage.

The cap is a cgroup v1 or v2 memory cgroup (memory_cgroup.py): root on v1, root or a
delegated subtree on v2. `--small` is the tree for a guest under TCG (memory_bench_vm): 6 directories
of 6 compiles, every size x0.125 (max 165 MiB, link 96 MiB), hold times x8, cap 352 MiB.
`--environment TEXT` names where it ran in the results (default: cgroup version and user).

usage: memory_bench.py [--quick] [--small] [--rounds K] [--admission-runs N] [--cap MIB]
                       [--dirs N] [--files N] [--mib-scale X] [--environment TEXT]
                       [--variants LIST] [--out DIR] [--work DIR] [--keep]
Writes OUT/memory.json (default build/bench-memory, quick: build/bench-memory-quick) and
prints the report section (memory_report.py). Progress goes to stderr.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import memory_cgroup  # noqa: E402  (bench_projects modules, found through HERE)
import memory_report  # noqa: E402
import memory_tree  # noqa: E402
import spawn_bench  # noqa: E402  (machine_info, rotated)

# Calibrated with stock SCons 4.4 on this project's 2-CPU VMs (two full runs, 3 ladder
# rounds + 10 paired rounds each): -j1..3 never failed (peak <= 3,067 MiB); -j4 passed
# 26 of 26 builds at load 6-15 but was OOM-killed at load 1.5 (a busy CPU slows SCons'
# dispatch and the page touching, so fewer heavy compiles overlap); -j5 failed 5 of 6;
# -j6..8 and --process-spawner -j8 failed every build, in the `codegen` directory.
DEFAULT_CAP_MIB = 3584
# --small, for a guest under TCG (user code 5-20x slower, page touching 25-100 MiB/s, SCons
# 0.4-1.3 s of driver time per command): 6 directories of 6 compiles, sizes x0.125 (max
# 165 MiB), hold times x8. With the hold times x1 the guest's SCons dispatched too slowly
# for heavy compiles to overlap: stock -j2..-j8 all peaked at 200-230 MiB (6.1, TCG).
SMALL = {"dirs": 6, "files": 6, "mib_scale": 0.125, "cap_mib": 352, "time_scale": 8.0}
MAX_JOBS = 8
LADDER = [f"stock-j{j}" for j in range(1, MAX_JOBS + 1)]
POOL_VARIANTS = ["pool-j8", "admit-cold", "admit-warm", "admit-warm-ro"]
WARM = ("admit-warm", "admit-warm-ro")
ERROR_LINE = re.compile(r"scons: \*\*\* \[(.+?)\] (.*)")
MEMORY_MODE_LINE = re.compile(r"memory measured by: (.*)")
POOL_SITE_INIT = "import spawnpool_scons\nspawnpool_scons.enable()\n"


def variant_args(variant, history=None):
    """(jobs, extra scons options) of a variant."""
    if variant.startswith("stock-j"):
        return int(variant[len("stock-j"):]), []
    options = ["--process-spawner"]
    if variant.startswith("admit-"):
        # --process-spawner-stats: its "memory measured by:" line says the peak source.
        options += ["--process-spawner-memory=auto", f"--process-spawner-history={history}",
                    "--process-spawner-stats"]
    return MAX_JOBS, options


class Bench:
    """The work directory, the built helpers, the tree, and one build at a time."""

    def __init__(self, args):
        self.args = args
        self.params = tree_params(args)
        self.work = args.work
        self.tree = os.path.join(self.work, "tree")
        self.bin = os.path.join(self.work, "bin")
        self.home = os.path.join(self.work, "home")  # no ~/.scons of the caller
        self.pool_site = os.path.join(self.work, "pool_site")
        self.history_root = os.path.join(self.work, "history")
        self.cold_count = 0

    # ---- set-up

    def prepare(self):
        for d in (self.bin, self.home, self.pool_site, self.history_root):
            os.makedirs(d, exist_ok=True)
        self.mem_compile = compile_c(os.path.join(HERE, "memory_bench", "mem_compile.c"),
                                     os.path.join(self.bin, "mem_compile"))
        self.tree_rusage = compile_c(os.path.join(HERE, "spawn_bench", "tree_rusage.c"),
                                     os.path.join(self.bin, "tree_rusage"))
        memory_tree.write_tree(self.params, self.tree)
        tool = os.path.join(self.tree, memory_tree.TOOL_PATH)
        os.makedirs(os.path.dirname(tool), exist_ok=True)
        shutil.copy2(self.mem_compile, tool)
        with open(os.path.join(self.pool_site, "site_init.py"), "w") as f:
            f.write(POOL_SITE_INIT)

    def env(self, pool):
        env = dict(os.environ, HOME=self.home, PYTHONNOUSERSITE="1")
        for name in ("SCONSFLAGS", "MAKEFLAGS", "PYTHONPATH"):
            env.pop(name, None)
        if pool:
            env["PYTHONPATH"] = os.pathsep.join([self.args.pool_path, self.args.plugin_path])
        return env

    def scons_command(self, variant, history):
        jobs, options = variant_args(variant, history)
        command = ["scons", "-Q", f"-j{jobs}"]
        if options:
            command.append(f"--site-dir={self.pool_site}")
        return command + options

    def history_for(self, variant):
        if variant == "admit-cold":
            self.cold_count += 1
            return os.path.join(self.history_root, f"cold-{self.cold_count}")
        if variant in WARM:
            return os.path.join(self.history_root, variant[len("admit-"):])
        return None

    # ---- one build

    def clean_tree(self):
        """Removes every output, SCons' database and the default history: each build
        starts from sources only, in the same directory (history keys hold the cwd)."""
        for target in memory_tree.outputs(self.params):
            path = os.path.join(self.tree, target)
            directory = os.path.dirname(path)
            for name in os.listdir(directory):
                if name == os.path.basename(path) or name.startswith(
                        os.path.basename(path) + ".tmp."):
                    os.unlink(os.path.join(directory, name))
        for name in (".sconsign.dblite", ".spawnpool"):
            path = os.path.join(self.tree, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)

    def run_build(self, variant, label):
        history = self.history_for(variant)
        self.clean_tree()
        command = self.scons_command(variant, history)
        rusage_path = os.path.join(self.work, "rusage.json")
        log_path = os.path.join(self.work, "build.log")
        if os.path.exists(rusage_path):
            os.unlink(rusage_path)
        record = {"variant": variant, "command": command, "history": history,
                  "loadavg_before": os.getloadavg()[0]}
        with memory_cgroup.MemoryCap(self.args.cap_mib << 20) as cap, \
                open(log_path, "w") as log:
            start = time.monotonic()
            proc = subprocess.Popen(cap.command(command, read_only_tree=variant.endswith("-ro"),
                                                wrapper=[self.tree_rusage, rusage_path]),
                                    cwd=self.tree, env=self.env(variant not in LADDER),
                                    stdout=log, stderr=subprocess.STDOUT)
            try:
                proc.wait(timeout=self.args.build_timeout)
                record["timed_out"] = False
            except subprocess.TimeoutExpired:
                record["timed_out"] = True
                cap.kill_all()
                proc.wait()
            record["harness_wall_s"] = time.monotonic() - start
            record.update(oom_kills=cap.oom_kills(), peak_bytes=cap.max_usage_bytes(),
                          left_behind=len(cap.pids()))
        record["exit_status"] = proc.returncode
        record.update(read_rusage(rusage_path))
        with open(log_path, errors="replace") as f:
            log_text = f.read()
        record["errors"] = [f"[{t}] {m}" for t, m in ERROR_LINE.findall(log_text)][:20]
        # The plugin's own warnings ("--process-spawner: could not start ..."), not the
        # memory option's ("--process-spawner-memory: no per-slot memory cgroups ...").
        record["pool_fallback"] = "warning: --process-spawner:" in log_text
        record["no_slot_cgroups"] = "no per-slot memory cgroups" in log_text
        mode = MEMORY_MODE_LINE.search(log_text)
        record["memory_mode"] = mode.group(1).strip() if mode else None
        problems = memory_tree.verify(self.params, self.tree)
        record["lost_outputs"] = len(problems)
        record["lost_examples"] = [f"{p} {why}" for p, why in problems[:5]]
        # A read-only variant that still made slot cgroups did not measure what it names.
        record["ok"] = (proc.returncode == 0 and not record["timed_out"]
                        and not record["pool_fallback"]
                        and record["no_slot_cgroups"] == variant.endswith("-ro"))
        # A whole build whose cap never held its largest command ran that command elsewhere
        # (a pool placing its commands in cgroups outside the driver's): the cap did not bind.
        largest = max(c["mib"] for c in memory_tree.commands(self.params))
        record["escaped_cap"] = record["ok"] and record["peak_bytes"] < largest << 20
        if not record["ok"]:
            record["log_tail"] = log_text[-1500:]
        print(f"{label}: {describe_run(record)}", file=sys.stderr, flush=True)
        return record

    # ---- can the plugin run a pool variant?

    def check_variant(self, variant):
        """None if scons runs this pool variant (its commands under the pool), else why."""
        if not os.path.isdir(os.path.join(self.args.pool_path, "spawnpool")):
            return (f"no spawnpool package in {self.args.pool_path} (build first: "
                    f"./scripts/setup)")
        check = os.path.join(self.work, f"check-{variant}")
        shutil.rmtree(check, ignore_errors=True)
        os.makedirs(check)
        with open(os.path.join(check, "SConstruct"), "w") as f:
            f.write("import os\nenv = Environment(ENV={'PATH': os.environ['PATH']})\n"
                    "# $$PPID: the shell's parent, SCons itself unless a pool ran it.\n"
                    "env.Command('parent', [], 'cat /proc/$$PPID/comm > $TARGET')\n"
                    f"env.Command('out', [], '{self.mem_compile} 1 0 $TARGET')\n")
        _, options = variant_args(variant, os.path.join(check, "history"))
        command = ["scons", "-Q", "-j2", f"--site-dir={self.pool_site}"] + options
        p = subprocess.run(command, cwd=check, env=self.env(True), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        try:
            with open(os.path.join(check, "parent")) as f:
                parent = f.read().strip()
        except OSError:
            parent = None
        shutil.rmtree(check, ignore_errors=True)
        if p.returncode != 0:
            last = (p.stdout.strip().splitlines() or ["no output"])[-1]
            shown = " ".join(options).replace(os.path.join(check, "history"), "PATH")
            return f"`scons {shown}` failed: {last.strip()}"
        if "warning: --process-spawner:" in p.stdout or parent in (None, "scons", "python3"):
            return (f"the plugin fell back to stock spawning (a command's parent was "
                    f"{parent!r}): {p.stdout.strip()[-400:]}")
        return None


def tree_params(args):
    """The tree's parameters: the default tree, --files compiles per directory and every
    size (compiles, archives, link) times --mib-scale."""
    p = memory_tree.Params()
    scale = args.mib_scale

    def scaled(mib, least=1):
        return max(least, round(mib * scale))

    return replace(p, seed=args.seed, time_scale=args.time_scale, dirs=args.dirs,
                   files=args.files,
                   p50_mib=scaled(p.p50_mib), p99_mib=scaled(p.p99_mib),
                   min_mib=scaled(p.min_mib, 2), max_mib=scaled(p.max_mib),
                   archive_mib=scaled(p.archive_mib, 4), link_mib=scaled(p.link_mib))


def describe_environment():
    """Where this runs, for the results: the cap's cgroup version and the user (the
    kernel is in the machine's information)."""
    found = memory_cgroup.own_memory_cgroup()
    where = f"cgroup v{found[2]}" if found else "no cgroup"
    return f"{where}, {'root' if os.geteuid() == 0 else 'unprivileged'}"


def compile_c(source, out):
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-o", out, source], check=True)
    return out


def read_rusage(path):
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return {"wall_s": None, "cpu_s": None}
    return {"wall_s": r["wall_s"], "cpu_s": r["user_s"] + r["sys_s"],
            "driver_cpu_s": (r["driver_user_s"] + r["driver_sys_s"]
                             if r["driver_user_s"] >= 0 else None),
            "processes_reaped": r["processes_reaped"]}


def describe_run(r):
    wall = f"{r['wall_s']:.1f} s" if r.get("wall_s") is not None else "no time"
    status = "ok" if r["ok"] else ("TIMEOUT" if r["timed_out"] else
                                   "pool FELL BACK to stock" if r["pool_fallback"] else
                                   f"FAILED (exit {r['exit_status']})")
    first_error = f"; {r['errors'][0]}" if r["errors"] else ""
    return (f"{status}, {wall}, {r['oom_kills']} OOM kills, {r['lost_outputs']} lost outputs, "
            f"cap peak {r['peak_bytes'] / (1 << 20):,.0f} MiB{first_error}")


def fastest_safe(runs, variants):
    """The static-j variant with no failed or lossy run and the lowest median wall time."""
    best = None
    for v in variants:
        mine = [r for r in runs if r["variant"] == v]
        if not mine or any(not r["ok"] or r["lost_outputs"] for r in mine):
            continue
        wall = statistics.median(r["wall_s"] for r in mine)
        if best is None or wall < best[1]:
            best = (v, wall)
    return best[0] if best else None


# ------------------------------------------------------------------------ phases

def run_phases(bench, args, result, save):
    """Phase 1 (the ladder), the reference, phase 2 (paired rounds); `result["runs"]`
    grows by one record per build and `save()` writes it each time."""
    variants, unavailable = args.variant_list, result["unavailable"]

    def build(variant, phase, rnd, label):
        r = bench.run_build(variant, label)
        r.update(phase=phase, round=rnd)
        result["runs"].append(r)
        save()

    ladder = [v for v in LADDER if v in variants]
    plan = [(rnd, v) for rnd in range(args.rounds) for v in spawn_bench.rotated(ladder, rnd)]
    for i, (rnd, v) in enumerate(plan, 1):
        build(v, "ladder", rnd, f"[ladder {i}/{len(plan)}] round {rnd + 1} {v}")
    reference = result["reference"] = args.reference or fastest_safe(result["runs"], ladder)
    if reference is None:
        result["notes"].append("No static -j of the ladder built without a failure: the cap "
                               "is too tight for a reference (or no ladder ran); phase 2 "
                               "was skipped.")
        return
    pool = [v for v in POOL_VARIANTS if v in variants and v not in unavailable]
    paired = list(dict.fromkeys([v for v in ["stock-j8", reference]
                                 if v in variants or v == args.reference] + pool))
    for v in WARM:
        if v in pool:
            build(v, "prime", -1, f"[prime] {v} (fills the kept history)")
    plan = [(rnd, v) for rnd in range(args.admission_runs)
            for v in spawn_bench.rotated(paired, rnd)]
    for i, (rnd, v) in enumerate(plan, 1):
        build(v, "paired", rnd, f"[paired {i}/{len(plan)}] round {rnd + 1} {v}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes: hold times x0.5, one ladder round, 2 paired rounds")
    ap.add_argument("--rounds", type=int, help="ladder rounds (3; quick 1; 0: no ladder)")
    ap.add_argument("--reference", choices=LADDER,
                    help="the static -j to pair with, instead of the ladder's fastest safe one")
    ap.add_argument("--admission-runs", type=int, help="paired rounds (10; quick 2)")
    ap.add_argument("--small", action="store_true",
                    help="the tree for a guest under TCG: 6 directories of 6 compiles, sizes "
                         "x0.125, hold times x8, cap 352 MiB (each overridable)")
    ap.add_argument("--cap", dest="cap_mib", type=int,
                    help=f"memory cap in MiB (default {DEFAULT_CAP_MIB}; small "
                         f"{SMALL['cap_mib']})")
    ap.add_argument("--dirs", type=int, help="directories (8; small 6)")
    ap.add_argument("--files", type=int, help="compiles per directory (30; small 6)")
    ap.add_argument("--mib-scale", type=float, help="every size times this (1.0; small 0.125)")
    ap.add_argument("--environment", help="where this runs, for the report (default: the "
                                          "cgroup version, the user and the kernel)")
    ap.add_argument("--seed", type=int, default=memory_tree.Params.seed)
    ap.add_argument("--time-scale", type=float, help="hold-time factor (1.0; quick 0.5)")
    ap.add_argument("--variants", default=",".join(LADDER + POOL_VARIANTS),
                    help="comma-separated; 'ladder' stands for stock-j1..8")
    ap.add_argument("--build-timeout", type=float, default=600, help="seconds per build")
    ap.add_argument("--out", help="results directory")
    ap.add_argument("--work", help="scratch directory (default: a fresh temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--pool-path", default=os.path.join(REPO, "build", "python"),
                    help="directory holding the spawnpool package")
    ap.add_argument("--plugin-path", default=os.path.join(REPO, "scons_plugin"),
                    help="directory holding the spawnpool_scons package")
    args = ap.parse_args(argv)
    def default(value, quick, full):
        return value if value is not None else quick if args.quick else full

    args.rounds = default(args.rounds, 1, 3)
    args.admission_runs = default(args.admission_runs, 2, 10)
    small = args.small
    args.time_scale = default(args.time_scale, 0.5, SMALL["time_scale"] if small else 1.0)
    args.cap_mib = args.cap_mib or (SMALL["cap_mib"] if small else DEFAULT_CAP_MIB)
    args.dirs = args.dirs or (SMALL["dirs"] if small else memory_tree.Params.dirs)
    args.files = args.files or (SMALL["files"] if small else memory_tree.Params.files)
    args.mib_scale = args.mib_scale or (SMALL["mib_scale"] if small else 1.0)
    args.environment = args.environment or describe_environment()
    args.out = os.path.abspath(args.out or os.path.join(
        REPO, "build", "bench-memory-quick" if args.quick else "bench-memory"))
    args.pool_path = os.path.abspath(args.pool_path)
    args.plugin_path = os.path.abspath(args.plugin_path)
    names = []
    for v in args.variants.split(","):
        names += LADDER if v == "ladder" else [v] if v else []
    unknown = set(names) - set(LADDER + POOL_VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {LADDER + POOL_VARIANTS}")
    args.variant_list = list(dict.fromkeys(names))
    return args


def main(argv=None):
    args = parse_args(argv)
    reason = memory_cgroup.unavailable_reason()
    if reason:
        print(f"memory_bench: cannot cap builds here: {reason}", file=sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C, so the finally blocks remove cgroups and the work dir.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    made_work = args.work is None
    args.work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="spawnpool-memory-bench-"))
    try:
        return run(args)
    finally:
        if made_work and not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)
        elif made_work:
            print(f"memory_bench: work directory kept: {args.work}", file=sys.stderr)


def run(args):
    started = time.time()
    bench = Bench(args)
    if os.path.exists(bench.tree):
        shutil.rmtree(bench.tree)
    bench.prepare()
    m = memory_tree.manifest(bench.params)
    print(f"memory_bench: tree: {memory_tree.format_distribution(m['distribution'])}; "
          f"{len(m['commands'])} commands; cap {args.cap_mib:,} MiB", file=sys.stderr)
    unavailable = {}
    for v in POOL_VARIANTS:
        if v in args.variant_list:
            why = bench.check_variant(v)
            if why:
                unavailable[v] = why
                print(f"memory_bench: skipping {v}: {why}", file=sys.stderr)
    result = {"machine": spawn_bench.machine_info(), "started": started, "duration_s": 0,
              "complete": False, "quick": args.quick, "small": args.small,
              "environment": args.environment, "cap_mib": args.cap_mib,
              "cgroup_version": (memory_cgroup.own_memory_cgroup() or (0, 0, None))[2],
              "params": asdict(bench.params), "distribution": m["distribution"],
              "commands": len(m["commands"]), "rounds": args.rounds,
              "admission_runs": args.admission_runs, "reference": None,
              "unavailable": unavailable, "notes": [],
              # paths inside the checkout as the repository's, so a row names no machine's
              "command_line": " ".join(["bench_projects/memory_bench.py"] + [
                  os.path.relpath(a, REPO) if a.startswith(REPO + os.sep) else a
                  for a in sys.argv[1:]]),
              "runs": []}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "memory.json")

    def save():
        result["duration_s"] = time.time() - started
        result["machine"]["loadavg_at_end"] = [f"{x:.2f}" for x in os.getloadavg()]
        with open(path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(path + ".tmp", path)

    run_phases(bench, args, result, save)
    result["complete"] = True
    save()
    print(f"memory_bench: {len(result['runs'])} builds in {result['duration_s'] / 60:.1f} min "
          f"-> {path}", file=sys.stderr)
    print(memory_report.section(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
