#!/usr/bin/python3
"""Generate the memory benchmark's SCons tree: compiles with a heavy-tailed memory profile.

Every command of the tree runs `mem_compile MIB HOLD_MS OUTPUT INPUT...`
(memory_bench/mem_compile.c): it takes MIB MiB, touches every page, holds them for
HOLD_MS ms (sleeping), and writes an output that depends only on its arguments and
inputs. The tree has `dirs` directories of `files` sources; each directory archives
its objects (a light command) and one final link (a heavy one) takes all archives.

The compiles' peaks follow a lognormal with the chosen median and 99th percentile,
clipped to [min_mib, max_mib]. The sizes are the distribution's quantiles at
(i + 0.5) / N, not random draws, so any N and seed give the same percentiles; the seed
only decides where each size goes. Real projects cluster their heavy files (one
directory of template-heavy sources), so `cluster_share` of the top `heavy_share` of
sizes go to one directory (`heavy_dir`, built third), the rest anywhere.

Hold times grow with the size, as heavy compiles take longer: hold_ms =
time_scale * (hold_base_ms + hold_per_mib_ms * MIB).

Same parameters -> byte-identical tree (placement uses SHA-256 of (seed, name)).
Python 3 standard library only; runs under /usr/bin/python3.

usage: memory_tree.py [--seed N] [--time-scale X] [--out DIR] [--json]
                      [--simulate CAP_MIB]
"""

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import sys
from dataclasses import asdict, dataclass, replace

MANIFEST_NAME = "memory_tree.json"
TOOL_PATH = "tools/mem_compile"   # where the harness compiles mem_compile into a tree
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
FNV_OFFSET = 0xcbf29ce484222325
FNV_PRIME = 0x100000001b3
DIRECTORY_NAMES = ("base", "util", "codegen", "io", "net", "sql", "ui", "tools")


@dataclass(frozen=True)
class Params:
    seed: int = 3
    dirs: int = 8
    files: int = 30               # compiles per directory
    heavy_dir: int = 2            # index of the directory that collects the heavy ones
    p50_mib: int = 100
    p99_mib: int = 1536
    min_mib: int = 8
    max_mib: int = 2048
    heavy_share: float = 0.10     # the top 10% of sizes are "heavy"...
    cluster_share: float = 0.80   # ...and 80% of those go to heavy_dir
    hold_base_ms: int = 150
    hold_per_mib_ms: float = 0.8
    time_scale: float = 1.0
    archive_mib: int = 16
    archive_ms: int = 100
    link_mib: int = 768
    link_ms: int = 1500


# ------------------------------------------------------------ the distribution

def constant(seed, *names):
    """A 64-bit value fixed by seed and names (stable across Pythons)."""
    digest = hashlib.sha256(":".join([str(seed), *names]).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def quantile_sizes(params, count):
    """`count` sizes in MiB, ascending: the clipped lognormal's quantiles at (i+0.5)/count."""
    normal = statistics.NormalDist()
    sigma = math.log(params.p99_mib / params.p50_mib) / normal.inv_cdf(0.99)
    sizes = []
    for i in range(count):
        z = normal.inv_cdf((i + 0.5) / count)
        mib = round(params.p50_mib * math.exp(sigma * z))
        sizes.append(min(params.max_mib, max(params.min_mib, mib)))
    return sizes


def place_sizes(params):
    """The sizes per directory, in build order: {directory index: [MiB, ...]}."""
    total = params.dirs * params.files
    ascending = quantile_sizes(params, total)
    heavy_count = round(total * params.heavy_share)
    items = list(enumerate(ascending))  # (rank, MiB); rank keeps the key unique
    heavy, light = items[total - heavy_count:], items[:total - heavy_count]
    cluster = [it for it in heavy
               if constant(params.seed, "cluster", str(it[0])) % 1000
               < params.cluster_share * 1000][:params.files]
    rest = [it for it in items if it not in cluster]
    rest.sort(key=lambda it: constant(params.seed, "place", str(it[0])))
    fill = params.files - len(cluster)
    # The heavy directory's free places take light sizes, so its heavy ones are spread
    # between light ones as in a real directory, not one solid block.
    fillers = [it for it in rest if it in light][:fill]
    rest = [it for it in rest if it not in fillers]
    placed = {}
    for d in range(params.dirs):
        if d == params.heavy_dir:
            chosen = cluster + fillers
        else:
            chosen, rest = rest[:params.files], rest[params.files:]
        chosen.sort(key=lambda it: constant(params.seed, "order", str(it[0])))
        placed[d] = [mib for _, mib in chosen]
    return placed


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a list of numbers."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def describe_sizes(sizes):
    """Percentiles and totals of a list of MiB sizes, for reports."""
    stats = {f"p{q}": percentile(sizes, q) for q in (10, 25, 50, 75, 90, 95, 99)}
    stats.update(min=min(sizes), max=max(sizes), mean=round(statistics.mean(sizes)),
                 count=len(sizes), total_gib=round(sum(sizes) / 1024, 1))
    return stats


def hold_ms(params, mib):
    return round(params.time_scale * (params.hold_base_ms + params.hold_per_mib_ms * mib))


# ------------------------------------------------------------------- the tree

def directory_name(params, d):
    return DIRECTORY_NAMES[d] if d < len(DIRECTORY_NAMES) else f"dir{d:02d}"


def commands(params):
    """Every command of the build in SCons' build order (sources before what needs them):
    dicts with target, kind (compile/archive/link), mib, hold_ms, inputs."""
    placed = place_sizes(params)
    result, archives = [], []
    for d in range(params.dirs):
        name = directory_name(params, d)
        objects = []
        for i, mib in enumerate(placed[d]):
            obj = f"{name}/f{i:02d}.o"
            result.append(dict(target=obj, kind="compile", mib=mib, hold_ms=hold_ms(params, mib),
                               inputs=[f"{name}/f{i:02d}.c"]))
            objects.append(obj)
        archive = f"{name}/lib{name}.a"
        result.append(dict(target=archive, kind="archive", mib=params.archive_mib,
                           hold_ms=round(params.time_scale * params.archive_ms), inputs=objects))
        archives.append(archive)
    result.append(dict(target="app", kind="link", mib=params.link_mib,
                       hold_ms=round(params.time_scale * params.link_ms), inputs=archives))
    return result


def source_text(params, path):
    value = constant(params.seed, "source", path) % 100000
    symbol = path.replace("/", "_").replace(".", "_")
    return (f"/* memory_tree source {path} (seed {params.seed}) */\n"
            f"int {symbol}(void) {{ return {value}; }}\n")


def fnv_update(h, data):
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xffffffffffffffff
    return h


def expected_output(target, mib, hold, input_bytes, page_size=PAGE_SIZE):
    """Python mirror of what mem_compile writes (see memory_bench/mem_compile.c)."""
    h = FNV_OFFSET
    for data in input_bytes:
        h = fnv_update(fnv_update(h, data), b"\0")
    pages = (mib << 20) // page_size
    checksum = (pages // 256) * sum(range(256)) + sum((i * 131 + 7) & 0xff
                                                       for i in range(pages - pages % 256, pages))
    return (f"mem_compile v1\ntarget {target}\nmib {mib}\nhold_ms {hold}\n"
            f"inputs {len(input_bytes)} {h:016x}\npages {pages} checksum {checksum}\n").encode()


def expected_files(params):
    """{path: bytes} of every source and every output a correct build leaves."""
    files = {}
    for d in range(params.dirs):
        name = directory_name(params, d)
        for i in range(params.files):
            path = f"{name}/f{i:02d}.c"
            files[path] = source_text(params, path).encode()
    for c in commands(params):
        files[c["target"]] = expected_output(c["target"], c["mib"], c["hold_ms"],
                                             [files[i] for i in c["inputs"]])
    return files


def render_sconstruct(params):
    lines = [
        "# Generated by bench_projects/memory_tree.py: the memory benchmark's tree.",
        "# Every command is mem_compile MIB HOLD_MS TARGET SOURCES (see its source).",
        "import os",
        "",
        "env = Environment(ENV={'PATH': os.environ.get('PATH', '/usr/bin:/bin')},",
        f"                  MEM_COMPILE=File('#{TOOL_PATH}').abspath)",
        "",
    ]
    for c in commands(params):
        sources = ", ".join(repr(i) for i in c["inputs"])
        lines.append(f"env.Command({c['target']!r}, [{sources}], "
                     f"'$MEM_COMPILE {c['mib']} {c['hold_ms']} $TARGET $SOURCES')")
    lines += ["", "Default('app')"]
    return "\n".join(lines) + "\n"


def manifest(params):
    cmds = commands(params)
    sizes = [c["mib"] for c in cmds if c["kind"] == "compile"]
    return {"params": asdict(params), "distribution": describe_sizes(sizes),
            "commands": cmds}


def write_tree(params, out):
    """Writes SConstruct, the sources and memory_tree.json into `out` (absent or empty)."""
    if os.path.exists(out) and os.listdir(out):
        raise SystemExit(f"memory_tree: {out} is not empty")
    files = {"SConstruct": render_sconstruct(params).encode(),
             MANIFEST_NAME: (json.dumps(manifest(params), indent=1) + "\n").encode()}
    files.update((path, data) for path, data in expected_files(params).items()
                 if path.endswith(".c"))
    for path, data in files.items():
        target = os.path.join(out, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)


def outputs(params):
    return [c["target"] for c in commands(params)]


def verify(params, tree):
    """Outputs of a build of `tree` that are missing or wrong: [(path, 'missing'|'wrong')]."""
    expected = expected_files(params)
    problems = []
    for path in outputs(params):
        try:
            with open(os.path.join(tree, path), "rb") as f:
                if f.read() != expected[path]:
                    problems.append((path, "wrong"))
        except FileNotFoundError:
            problems.append((path, "missing"))
    return problems


def params_from_tree(tree):
    with open(os.path.join(tree, MANIFEST_NAME)) as f:
        return Params(**json.load(f)["params"])


# ------------------------------------------------------------------ simulation

def simulate(params, jobs, cap_mib, trials=200, driver_mib=60, jitter=0.3, fixed_ms=25,
             touch_ms_per_gib=150):
    """Static -j on this tree: SCons-like list scheduling (a free slot takes the first
    ready command in build order), each command's duration scaled by a random factor in
    [1 - jitter/2, 1 + jitter/2]. Returns the fraction of trials whose peak (commands +
    driver) passed cap_mib, the median peak and the median wall time. Only a guide to
    choosing the cap: the real builds decide."""
    cmds = commands(params)
    index = {c["target"]: i for i, c in enumerate(cmds)}
    deps = [[index[i] for i in c["inputs"] if i in index] for c in cmds]
    base = [fixed_ms + c["hold_ms"] + touch_ms_per_gib * c["mib"] / 1024 for c in cmds]
    rng = random.Random(params.seed)
    failed, peaks, walls = 0, [], []
    for _ in range(trials):
        left = [b * (1 + jitter * (rng.random() - 0.5)) for b in base]  # ms still to run
        done = [False] * len(cmds)
        waiting = list(range(len(cmds)))  # not started, in build order
        running, now, peak = [], 0.0, 0
        while waiting or running:
            for i in list(waiting):
                if len(running) == jobs:
                    break
                if all(done[d] for d in deps[i]):
                    waiting.remove(i)
                    running.append(i)
            peak = max(peak, driver_mib + sum(cmds[i]["mib"] for i in running))
            step = min(left[i] for i in running)
            now += step
            for i in list(running):
                left[i] -= step
                if left[i] <= 1e-9:
                    done[i] = True
                    running.remove(i)
        failed += peak > cap_mib
        peaks.append(peak)
        walls.append(now / 1000)
    return {"jobs": jobs, "fail_fraction": failed / trials,
            "median_peak_mib": statistics.median(peaks),
            "median_wall_s": round(statistics.median(walls), 1)}


# ------------------------------------------------------------------------- CLI

def format_distribution(stats):
    keys = ["p10", "p25", "p50", "p75", "p90", "p95", "p99", "max"]
    return (f"{stats['count']} compiles, MiB: " + ", ".join(f"{k} {stats[k]:,}" for k in keys)
            + f"; mean {stats['mean']:,}, total {stats['total_gib']} GiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=Params.seed)
    ap.add_argument("--time-scale", type=float, default=Params.time_scale,
                    help="multiplies every hold time (quick runs use 0.5)")
    ap.add_argument("--out", help="directory to write the tree into (absent or empty)")
    ap.add_argument("--json", action="store_true", help="print the manifest's summary as JSON")
    ap.add_argument("--simulate", type=int, metavar="CAP_MIB",
                    help="print the simulated static -j1..8 failure rates under this cap")
    args = ap.parse_args()
    params = replace(Params(), seed=args.seed, time_scale=args.time_scale)
    m = manifest(params)
    if args.out:
        write_tree(params, args.out)
    if args.json:
        print(json.dumps({"params": m["params"], "distribution": m["distribution"],
                          "commands": len(m["commands"])}, indent=1))
    else:
        print(format_distribution(m["distribution"]))
        placed = place_sizes(params)
        for d in range(params.dirs):
            print(f"  {directory_name(params, d):<8} " + " ".join(f"{v}" for v in placed[d]))
    if args.simulate:
        for jobs in range(1, 9):
            print(simulate(params, jobs, args.simulate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
