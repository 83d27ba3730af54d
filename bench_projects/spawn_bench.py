#!/usr/bin/python3
"""Spawn benchmark: what one command costs a build driver, per spawn method.

Every method starts the same tiny static program (spawn_bench/noop.c, `gcc -static -O2`)
and waits for it:

  floor           posix_spawn + waitpid from a tiny C++ process (spawn_bench/spawn_floor.cc)
  popen           subprocess.Popen(argv, env=ENV, close_fds=True).wait(), as SCons does
                  (the vfork path on Python >= 3.10)
  popen_fork      the same with a no-op preexec_fn, which forces fork() (SCons on
                  Python <= 3.9 and macOS)
  pickle_spawner  the SCons PR #3719 design: a Python spawner process per thread, fed
                  pickled (argv, env, cwd) over its stdin (spawn_bench/pickle_spawner.py)
  pool            spawnpool.Pool.run(Command) from Python

Axes: the driver's RSS (a bytearray with every page written: 0, 1, 4, 8 GiB), its soft
RLIMIT_NOFILE (1,024 and the hard limit), and 1, 2, 4, 8 concurrent threads (aggregate
spawns/s; the floor runs as many threads in its C++ process). Each point of a round is a
fresh worker process (`--worker`) that grows to the RSS and starts the pool and spawners.
One thread: it runs one command at a time, cycling through the methods in a new random
order each cycle (Popen via fork() cycles with the floor in a group of its own: a fork
leaves the driver's pages copy-on-write, which would tax the methods run after it), and
each method's ratio is the median over cycles of its time / the floor's in that cycle.
Threads: batches per method and thread count, paired with the floor's batch of the same
repetition. A last worker per round times the pool's driver<->spawner round trip with
the two pinned to one vCPU and to two (the "handoff" diagnostic).

Per batch: the median and mean wall time per command, the driver's own CPU (the
process's CPU clock, i.e. getrusage(RUSAGE_SELF) user + sys, of the Python process or of
the C++ process for the floor) and the CPU of helper processes (the pool's spawners, the
pickle spawners: /proc/PID/task/*/schedstat), each divided by the number of commands.

usage: spawn_bench.py [--quick] [--out DIR] [--rounds N] [--rss 0,1,4,8] ...
Writes DIR/spawn.json (default DIR: build/bench); bench_projects/report.py turns it into
tables and plots. Progress goes to stderr.
"""

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HELPERS = os.path.join(HERE, "spawn_bench")
METHODS = ["floor", "popen", "popen_fork", "pickle_spawner", "pool"]
# The environment every method hands the command; SCons' default ENV is PATH only.
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
GIB = 1 << 30
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------------------
# Helper programs

def build_helpers(bin_dir):
    """Compiles the helper programs into bin_dir when missing or older than their source."""
    os.makedirs(bin_dir, exist_ok=True)
    recipes = {
        "noop": (["gcc", "-static", "-O2"], "noop.c"),
        "spawn_floor": (["g++", "-O2", "-std=c++17", "-pthread"], "spawn_floor.cc"),
        "tree_rusage": (["gcc", "-O2", "-Wall"], "tree_rusage.c"),
    }
    paths = {}
    for name, (compiler, source) in recipes.items():
        src = os.path.join(HELPERS, source)
        out = os.path.join(bin_dir, name)
        if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
            subprocess.run(compiler + ["-o", out, src], check=True)
        paths[name] = out
    return paths


# ---------------------------------------------------------------------------------------
# Worker side: one process at one (RSS, RLIMIT_NOFILE) point

def grow_rss(gib):
    """A bytearray of `gib` GiB with every page written, so it is resident."""
    if gib <= 0:
        return None
    size = int(gib * GIB)
    buf = bytearray(size)
    buf[::PAGE] = b"\x01" * len(range(0, size, PAGE))
    return buf


def vm_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_cpu_s(pids):
    """CPU time of the given processes (their own threads, not their children), from
    /proc/PID/task/TID/schedstat in nanoseconds: /proc/PID/stat counts in 10 ms ticks,
    too coarse for a helper that spends tens of microseconds per command."""
    total = 0
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def self_cpu_s():
    """This process's CPU, all threads: what getrusage(RUSAGE_SELF) user + sys adds up
    to, read from CLOCK_PROCESS_CPUTIME_ID, which is exact to the nanosecond. getrusage
    splits the same total into user and sys from tick samples and keeps each reading
    monotonic, so the difference of two readings a millisecond apart can lag."""
    return time.process_time()


def _no_op():
    pass


class Methods:
    """The Python-side spawn methods, ready to call from `threads` threads."""

    def __init__(self, bins, threads, pool_path, same_cpu_handoff=None):
        sys.path.insert(0, pool_path)
        sys.path.insert(0, HELPERS)
        import spawnpool
        from pickle_spawner import PickleSpawner
        self.noop = bins["noop"]
        self.argv = [self.noop]
        self.floor_bin = bins["spawn_floor"]
        hint = {} if same_cpu_handoff is None else {"same_cpu_handoff": same_cpu_handoff == "yes"}
        self.pool = spawnpool.Pool(slots=threads, **hint)
        self.command = spawnpool.Command(self.argv, ENV)    # a value: reused by every call
        # Commands print nothing, but keep them off our result pipe all the same.
        self.pickle = [PickleSpawner(out_fd=2) for _ in range(threads)]

    def close(self):
        self.pool.close()
        for s in self.pickle:
            s.close()

    def helper_pids(self, method):
        if method == "pool":
            return self.pool.spawner_pids
        if method == "pickle_spawner":
            return [s.pid for s in self.pickle]
        return []

    def call(self, method, thread_index):
        """A no-argument function that runs one command with `method`; returns its status."""
        argv = self.argv
        if method == "popen":
            return lambda: subprocess.Popen(argv, env=ENV, close_fds=True).wait()
        if method == "popen_fork":
            return lambda: subprocess.Popen(argv, env=ENV, close_fds=True,
                                            preexec_fn=_no_op).wait()
        if method == "pickle_spawner":
            spawner = self.pickle[thread_index]
            return lambda: spawner.run(argv, ENV, None)
        if method == "pool":
            run = self.pool.run
            command = self.command
            return lambda: run(command).returncode
        raise ValueError(method)


def run_floor(methods, threads, batch):
    out = subprocess.run(
        [methods.floor_bin, "batch", methods.noop, str(threads), str(batch["min_count"]),
         str(int(batch["budget_s"] * 1000)), str(batch["max_count"])],
        check=True, stdout=subprocess.PIPE, text=True).stdout
    r = json.loads(out)
    r["helper_cpu_s"] = 0.0
    return r


class FloorServer:
    """spawn_floor in serve mode: one command per call, timed inside the C++ process."""

    def __init__(self, methods):
        self.proc = subprocess.Popen([methods.floor_bin, "serve", methods.noop],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self):
        """(wall seconds of posix_spawn + waitpid, the floor process's CPU seconds)."""
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()
        latency_ns, cpu_ns = self.proc.stdout.readline().split()
        return int(latency_ns) / 1e9, int(cpu_ns) / 1e9

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def interleaved_groups(batch):
    """The method groups cycled together. Popen via fork() gets a group of its own, with
    the floor: after a fork, every page the Python driver writes takes a copy-on-write
    fault (the page tables were write-protected for the child), so in-process methods
    run right after a fork would pay for it, while the floor, in its own process, would
    not. Groups alternate in order from round to round."""
    main = [m for m in batch["methods"] if m != "popen_fork"]
    groups = [("main", main)]
    if "popen_fork" in batch["methods"]:
        groups.append(("fork", ["floor", "popen_fork"]))
    return groups if batch["seed"] % 2 == 0 else groups[::-1]


def run_interleaved(methods, batch, group, active):
    """One thread, one command at a time: every cycle runs each method of `active` once,
    in a random order (a fixed rotation would always put the same method after the same
    other one), so all methods see the same moments of a shared machine. Returns one
    record per method; `ratio_median` is the median over cycles of the method's time /
    the floor's in the same cycle."""
    floor = FloorServer(methods)
    calls = {m: methods.call(m, 0) for m in active if m != "floor"}
    shuffle = random.Random(batch["seed"]).shuffle

    def timed(method):
        if method == "floor":
            return floor.call()
        call = calls[method]
        c0 = self_cpu_s()
        t0 = time.perf_counter()
        rc = call()
        t1 = time.perf_counter()
        c1 = self_cpu_s()
        if rc != 0:
            raise RuntimeError(f"{method}: the command failed with status {rc}")
        return t1 - t0, c1 - c0

    for method in active:  # warm-up, not measured
        timed(method)
        timed(method)
    helpers = {m: methods.helper_pids(m) for m in active}
    helper0 = {m: proc_cpu_s(p) for m, p in helpers.items()}
    lat = {m: [] for m in active}
    cpu = {m: 0.0 for m in active}
    order = list(active)
    start = time.perf_counter()
    cycle = 0
    while True:
        shuffle(order)
        for method in order:
            wall, used = timed(method)
            lat[method].append(wall)
            cpu[method] += used
        cycle += 1
        if cycle >= batch["min_count"] and time.perf_counter() - start >= batch["budget_s"]:
            break
    elapsed = time.perf_counter() - start
    floor.close()
    records = []
    for m in active:
        n = len(lat[m])
        ratios = [a / b for a, b in zip(lat[m], lat["floor"])]
        records.append({
            "method": m, "group": group, "threads": 1, "count": n, "cycles": cycle,
            "elapsed_s": elapsed,
            "median_us": median(lat[m]) * 1e6, "mean_us": sum(lat[m]) / n * 1e6,
            "p10_us": sorted(lat[m])[n // 10] * 1e6, "p90_us": sorted(lat[m])[n * 9 // 10] * 1e6,
            "ratio_median": median(ratios),
            "ratio_of_means": sum(lat[m]) / sum(lat["floor"]),
            "driver_cpu_s": cpu[m], "helper_cpu_s": proc_cpu_s(helpers[m]) - helper0[m]})
    return records


def run_handoff(methods, batch):
    """Diagnostic: the pool's driver<->spawner round trip alone (a command whose program
    is not on PATH: the spawner answers without starting a process), and a real command.
    A pool with the same-CPU hint (each hand-off pins the side it wakes to the waker's
    CPU, see docs/architecture.md "The CPU hint") runs beside the pool as shipped, without
    it: the driver and the spawner left to the scheduler, pinned to one CPU, and pinned
    to two different CPUs. The floor runs pinned like the driver. On a VM whose idle vCPUs halt,
    a wake-up sent to another (halted) vCPU costs far more than one on the waker's."""
    import spawnpool
    cpus = sorted(os.sched_getaffinity(0))
    unhinted = spawnpool.Pool(slots=1, same_cpu_handoff=False)
    hinted = spawnpool.Pool(slots=1, same_cpu_handoff=True)
    placements = [("same-CPU hand-off", hinted, None, None),
                  ("scheduler's choice (default)", unhinted, None, None),
                  ("one CPU", unhinted, cpus[0], cpus[0])]
    if len(cpus) > 1:
        placements.append(("two CPUs", unhinted, cpus[0], cpus[1]))
    unstartable = spawnpool.Command(["spawn-bench-no-such-program"], {"PATH": "/nonexistent"})
    records = []
    try:
        for name, pool, driver_cpu, spawner_cpu in placements:
            spawner = pool.spawner_pids[0]
            os.sched_setaffinity(0, set(cpus) if driver_cpu is None else {driver_cpu})
            os.sched_setaffinity(spawner, set(cpus) if spawner_cpu is None else {spawner_cpu})
            trips = []
            for _ in range(batch["round_trips"]):
                t0 = time.perf_counter()
                pool.run(unstartable)           # a Result with its failure: no exception
                trips.append(time.perf_counter() - t0)
            # The floor server is started under the driver's affinity and inherits it.
            floor = FloorServer(methods)
            spawns, floors = [], []
            for _ in range(batch["spawns"]):
                floors.append(floor.call()[0])
                t0 = time.perf_counter()
                pool.run(methods.command)
                spawns.append(time.perf_counter() - t0)
            floor.close()
            os.sched_setaffinity(0, set(cpus))
            os.sched_setaffinity(spawner, set(cpus))
            records.append({"method": "handoff", "placement": name,
                            "round_trip_us": median(trips) * 1e6,
                            "pool_median_us": median(spawns) * 1e6,
                            "floor_median_us": median(floors) * 1e6,
                            "ratio_median": median([a / b for a, b in zip(spawns, floors)])})
    finally:
        os.sched_setaffinity(0, set(cpus))
        unhinted.close()
        hinted.close()
    return records


def run_python(methods, method, threads, batch):
    """One batch of `method` from `threads` threads; the stop rule is the floor's."""
    calls = [methods.call(method, i) for i in range(threads)]
    for call in calls:  # warm-up, not measured
        call()
        call()
    budget, min_count, max_count = batch["budget_s"], batch["min_count"], batch["max_count"]
    lock = threading.Lock()
    state = {"done": 0, "end": 0.0, "failed": 0}
    latencies = []
    go = threading.Event()
    start_box = [0.0]

    def loop(call):
        go.wait()
        start = start_box[0]
        mine = []
        failed = 0
        while True:
            t0 = time.perf_counter()
            if call() != 0:
                failed += 1
            t1 = time.perf_counter()
            mine.append(t1 - t0)
            with lock:
                state["done"] += 1
                n = state["done"]
            if n >= max_count or (n >= min_count and t1 - start >= budget):
                break
        t = time.perf_counter()
        with lock:
            latencies.extend(mine)
            state["end"] = max(state["end"], t)
            state["failed"] += failed

    workers = [threading.Thread(target=loop, args=(c,)) for c in calls]
    for w in workers:
        w.start()
    helpers = methods.helper_pids(method)
    cpu0, helper0 = self_cpu_s(), proc_cpu_s(helpers)
    start_box[0] = time.perf_counter()
    go.set()
    for w in workers:
        w.join()
    cpu1, helper1 = self_cpu_s(), proc_cpu_s(helpers)
    if state["failed"]:
        raise RuntimeError(f"{method}: {state['failed']} commands failed")
    latencies.sort()
    n = len(latencies)
    median = (latencies[n // 2] if n % 2 else (latencies[n // 2 - 1] + latencies[n // 2]) / 2)
    return {"count": n, "elapsed_s": state["end"] - start_box[0], "median_us": median * 1e6,
            "mean_us": sum(latencies) / n * 1e6, "driver_cpu_s": cpu1 - cpu0,
            "helper_cpu_s": helper1 - helper0}


def worker(spec):
    """Runs the batches of `spec` at its RSS and RLIMIT_NOFILE; one JSON line per batch."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything a command prints goes to stderr, not into our results
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (spec["nofile"], hard))
    t0 = time.perf_counter()
    ballast = grow_rss(spec["rss_gib"])
    grow_s = time.perf_counter() - t0
    rss_kb = vm_rss_kb()
    max_threads = max(b["threads"] for b in spec["batches"])
    methods = Methods(spec["bins"], max_threads, spec["pool_path"],
                      spec.get("same_cpu_handoff"))
    try:
        for batch in spec["batches"]:
            method, threads = batch["method"], batch["threads"]
            if method == "interleaved":
                got = []
                for group, active in interleaved_groups(batch):
                    got += run_interleaved(methods, batch, group, active)
            elif method == "handoff":
                got = run_handoff(methods, batch)
            elif method == "floor":
                got = [run_floor(methods, threads, batch)]
            else:
                got = [run_python(methods, method, threads, batch)]
            for r in got:
                r.setdefault("method", method)
                r.update({"threads": threads, "rep": batch["rep"], "rss_gib": spec["rss_gib"],
                          "nofile": spec["nofile"], "round": spec["round"],
                          "kind": spec["kind"], "vm_rss_kb": rss_kb, "grow_s": grow_s})
                out.write(json.dumps(r) + "\n")
            out.flush()
    finally:
        methods.close()
    del ballast


# ---------------------------------------------------------------------------------------
# Orchestrator side

def rotated(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def max_nofile():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        with open("/proc/sys/fs/nr_open") as f:
            hard = int(f.read())
    return hard


def machine_info():
    info = {"nproc": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "cpu": platform.processor()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["ram_kb"] = int(f.readline().split()[1])
    except OSError:
        pass
    try:
        info["glibc"] = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        pass
    try:
        with open("/proc/loadavg") as f:
            info["loadavg_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    try:
        git = ["git", "-C", REPO]
        info["commit"] = subprocess.run(git + ["rev-parse", "--short", "HEAD"], check=True,
                                        stdout=subprocess.PIPE, text=True).stdout.strip()
        info["uncommitted_changes"] = bool(subprocess.run(
            git + ["status", "--porcelain", "--untracked-files=no"], check=True,
            stdout=subprocess.PIPE, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def plan(args, nofile_max):
    """The worker runs: a list of specs, rounds outermost, points rotated per round."""
    points = [("single", rss, nofile) for rss in args.rss for nofile in (1024, nofile_max)]
    points += [("threads", rss, 1024) for rss in args.threads_rss]
    points.append(("handoff", 0, 1024))
    runs = []
    for rnd in range(args.rounds):
        for kind, rss, nofile in rotated(points, rnd):
            batches = []
            if kind == "single":
                batches.append({"method": "interleaved", "threads": 1, "rep": 0,
                                "budget_s": args.single_budget, "min_count": args.min_count,
                                "max_count": 0, "methods": args.methods,
                                "seed": len(runs)})
            if kind == "handoff":
                batches.append({"method": "handoff", "threads": 1, "rep": 0,
                                "round_trips": args.round_trips, "spawns": args.round_trips // 5})
            thread_counts = args.threads if kind == "threads" else []
            for rep in range(args.reps if thread_counts else 0):
                for t_i, threads in enumerate(rotated(thread_counts, rnd + rep)):
                    for method in rotated(args.methods, rnd + rep + t_i):
                        batches.append({"method": method, "threads": threads, "rep": rep,
                                        "budget_s": args.budget, "single_budget_s": args.single_budget,
                         "min_count": args.min_count,
                                        "max_count": 100000})
            runs.append({"kind": kind, "rss_gib": rss, "nofile": nofile, "round": rnd,
                         "batches": batches})
    return runs


def progress_line(records):
    """One line per batch group: per-command ms (one thread) or spawns/s, and x floor."""
    by = {r["method"]: r for r in records if r.get("group", "main") == "main"}
    by.update({r["method"]: r for r in records if r.get("group") == "fork"
               and r["method"] != "floor"})
    floor = by.get("floor")
    parts = []
    for m in METHODS:
        if m not in by:
            continue
        r = by[m]
        if "ratio_median" in r:
            text = f"{m} {r['median_us'] / 1000:.2f} ms"
            if m != "floor":
                text += f" ({r['ratio_median']:.2f}x)"
        else:
            rate = r["count"] / r["elapsed_s"]
            text = f"{m} {rate:.0f}/s"
            if floor and m != "floor":
                text += f" ({rate / (floor['count'] / floor['elapsed_s']):.2f}x)"
        parts.append(text)
    return ", ".join(parts)


def run_worker(spec):
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps(spec))
    proc.stdin.close()
    records = []
    for line in proc.stdout:
        records.append(json.loads(line))
    if proc.wait() != 0:
        raise RuntimeError(f"spawn_bench worker failed (status {proc.returncode}) at "
                           f"RSS {spec['rss_gib']} GiB, RLIMIT_NOFILE {spec['nofile']}")
    return records


def parse_list(text, kind=float):
    return [kind(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds of short batches, threads at RSS 0 only (about 2 min)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench"),
                    help="directory for spawn.json and the helper binaries")
    ap.add_argument("--rounds", type=int, help="rounds over all points (5; quick 2)")
    ap.add_argument("--reps", type=int, help="batches per method per worker (3; quick 2)")
    ap.add_argument("--single-budget", type=float,
                    help="seconds of interleaved one-thread cycles per worker (3; quick 1)")
    ap.add_argument("--budget", type=float,
                    help="seconds per thread-axis batch (0.4; quick 0.3)")
    ap.add_argument("--round-trips", type=int,
                    help="pool round trips per placement in the handoff diagnostic "
                         "(2000; quick 500)")
    ap.add_argument("--min-count", type=int, default=5,
                    help="commands per batch, or one-thread cycles, at least")
    ap.add_argument("--rss", help="driver RSS points in GiB (0,1,4,8)")
    ap.add_argument("--threads", default="1,2,4,8", help="thread counts (1,2,4,8)")
    ap.add_argument("--threads-rss", help="RSS points for the thread axis (0,4; quick 0)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="methods to run, floor first (default: all)")
    ap.add_argument("--pool-path", default=os.path.join(REPO, "build", "python"),
                    help="directory holding the spawnpool package")
    ap.add_argument("--same-cpu-handoff", choices=("yes", "no"),
                    help="the pool method's Pool(same_cpu_handoff=) (default: the pool's "
                         "default); to show what the hint's default trades")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    args.pool_path = os.path.abspath(args.pool_path)

    if args.worker:
        spec = json.load(sys.stdin if args.worker == "-" else open(args.worker))
        worker(spec)
        return 0

    quick = args.quick
    args.rounds = args.rounds or (2 if quick else 5)
    args.reps = args.reps or (2 if quick else 3)
    # Quick batches of 0.15 s swung 0.8-1.4x the floor on this shared VM; 0.3 s costs
    # about 10 s more per quick run.
    args.budget = args.budget or (0.3 if quick else 0.4)
    args.single_budget = args.single_budget or (1.0 if quick else 3.0)
    args.round_trips = args.round_trips or (500 if quick else 2000)
    args.rss = parse_list(args.rss or "0,1,4,8")
    args.threads = parse_list(args.threads, int)
    args.threads_rss = parse_list(args.threads_rss if args.threads_rss is not None else
                                  ("0" if quick else "0,4"))
    args.methods = [m for m in args.methods.split(",") if m]
    if args.methods[0] != "floor" or not set(args.methods) <= set(METHODS):
        sys.exit(f"spawn_bench: --methods must start with floor and name only {METHODS}")
    if not os.path.isdir(os.path.join(args.pool_path, "spawnpool")):
        sys.exit(f"spawn_bench: no spawnpool package in {args.pool_path} (build it first)")

    bins = build_helpers(os.path.join(args.out, "bin"))
    nofile_max = max_nofile()
    runs = plan(args, nofile_max)
    started = time.time()
    info = machine_info()
    records = []
    for i, spec in enumerate(runs, 1):
        spec.update({"bins": bins, "pool_path": os.path.abspath(args.pool_path),
                     "same_cpu_handoff": args.same_cpu_handoff})
        label = (f"[{i}/{len(runs)}] round {spec['round'] + 1} {spec['kind']:7} "
                 f"RSS {spec['rss_gib']:g} GiB, RLIMIT_NOFILE {spec['nofile']}")
        print(label + " ...", file=sys.stderr, flush=True)
        load = os.getloadavg()[0]
        got = run_worker(spec)
        for r in got:
            r["loadavg_before"] = load
        records.extend(got)
        if spec["kind"] == "handoff":
            for r in got:
                print(f"    driver and spawner on {r['placement']}: pool round trip "
                      f"without a spawn {r['round_trip_us']:.0f} us; per command pool "
                      f"{r['pool_median_us'] / 1000:.2f} ms, floor "
                      f"{r['floor_median_us'] / 1000:.2f} ms ({r['ratio_median']:.2f}x)",
                      file=sys.stderr, flush=True)
            continue
        for rep in sorted({r["rep"] for r in got}):
            for threads in sorted({r["threads"] for r in got}):
                sel = [r for r in got if r["rep"] == rep and r["threads"] == threads]
                what = ("1 thread, per command" if spec["kind"] == "single" else
                        f"{threads} thr, spawns/s")
                print(f"    {what}: {progress_line(sel)}", file=sys.stderr, flush=True)
    info["loadavg_at_end"] = [f"{x:.2f}" for x in os.getloadavg()]
    result = {"machine": info, "started": started, "duration_s": time.time() - started,
              "params": {"quick": quick, "rounds": args.rounds, "reps": args.reps,
                         "same_cpu_handoff": args.same_cpu_handoff,
                         "budget_s": args.budget, "single_budget_s": args.single_budget,
                         "min_count": args.min_count,
                         "rss_gib": args.rss, "threads": args.threads,
                         "threads_rss_gib": args.threads_rss, "nofile_max": nofile_max,
                         "methods": args.methods, "env": ENV},
              "records": records}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "spawn.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"spawn_bench: {len(records)} batches in {result['duration_s']:.0f} s -> {path}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
