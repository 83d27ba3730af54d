#!/usr/bin/python3
"""Build benchmark: a full build of a genscons tree with each way of spawning.

Variants (each a fresh copy of the same generated tree; the SCons site_init.py files
that make the variants are generated into the copy, never into the plugin):

  stock     scons -jN, stock SCons 4.4 (Popen on the vfork path of Python 3.11)
  fork2g    stock SCons whose driver allocates and touches 2 GiB and whose spawn goes
            through Popen with a no-op preexec_fn, i.e. fork(): SCons on Python <= 3.9
            or macOS, with a grown driver
  pickle    the SCons PR #3719 design: SPAWN replaced by per-job-thread Python spawner
            processes fed by pickle over pipes (spawn_bench/pickle_spawner.py)
  pool      scons --process-spawner (scons_plugin/, spawnpool)
  poolsh    the same with --process-spawner-direct-exec=no (every command via sh -c)
  poolnocpu the same with --process-spawner-same-cpu-handoff=no (no same-CPU hint: the
            default since the run of 2026-12-03; the variant names it explicitly)
  poolcpu   the same with --process-spawner-same-cpu-handoff=yes (the same-CPU hint)
  pool2g    --process-spawner with the same 2 GiB driver as fork2g
  make      make -jN on the tree's Makefile

Each build runs under spawn_bench/tree_rusage, a child subreaper that reaps every
process of the tree with wait4() and sums their rusage, so spawner processes that no
one waits for are counted. Every build's outputs are checked with verify_outputs.py.

The interpreter axis (--pythons 3.8,3.11): every variant (default stock,pool) under each
CPython, all with one SCons release from its tarball (--scons-release, default 4.4.0, the
version Debian ships): CPython <= 3.9 starts every command with fork(), 3.10+ with vfork,
so stock on 3.8 pays for the fork of SCons' driver as the build grows it (no ballast).
"3.8" means pyenv's newest 3.8.x (both versions then come from the same kind of build);
a path names any interpreter. Writes DIR/build_pythons.json instead.

usage: build_bench.py [--quick] [--preset medium|large] [--rounds N] [--jobs 2]
                      [--variants stock,fork2g,...] [--out DIR] [--work DIR]
                      [--pythons 3.8,3.11 [--scons-release 4.4.0]]
Writes DIR/build.json (default build/bench). Progress goes to stderr.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HELPERS = os.path.join(HERE, "spawn_bench")
sys.path.insert(0, HERE)
import spawn_bench  # noqa: E402  (helper builds and machine info)

BALLAST_GIB = 2
# The project's shared folder sits beside the repository (../shared), wherever it is cloned.
RELEASES_DIR = (os.environ.get("SPAWNPOOL_SCONS_RELEASES")
                or os.path.join(os.path.dirname(REPO), "shared", "scons"))
PYENV_ROOT = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")

# site_scons/site_init.py snippets, generated into the benchmark's copy of the tree.
BALLAST = f'''
# Benchmark only: grow the SCons driver by {BALLAST_GIB} GiB of touched memory, as a large
# project's dependency graph would.
_ballast = bytearray({BALLAST_GIB} << 30)
_ballast[::4096] = b"\\x01" * len(range(0, len(_ballast), 4096))
'''

FORK_SPAWN = '''
# Benchmark only: SCons' spawn through Popen with a preexec_fn, which makes CPython use
# fork() instead of vfork (what SCons does on Python <= 3.9 and on macOS).
import subprocess
import SCons.Platform.posix as _posix


def _no_op():
    pass


def _exec_subprocess_fork(l, env):
    return subprocess.Popen(l, env=env, close_fds=True, preexec_fn=_no_op).wait()


_posix.exec_subprocess = _exec_subprocess_fork
'''

PICKLE_SPAWN = '''
# Benchmark only: the SCons PR #3719 design. Each SCons job thread owns a Python spawner
# process, started at its first command, and sends it pickled (argv, env, cwd) over a
# pipe; the spawner Popens the command and pickles the return code back. SPAWN is
# replaced for every Environment (posix.generate reads subprocess_spawn at call time;
# this runs before any SConscript). PSPAWN (Configure) is not routed, as in the PR.
import atexit
import sys
import threading

sys.path.insert(0, {helpers!r})
from pickle_spawner import PickleSpawner
import SCons.Platform.posix as _posix

_local = threading.local()
_spawners = []
_spawners_lock = threading.Lock()


def _spawner():
    s = getattr(_local, "spawner", None)
    if s is None:
        s = _local.spawner = PickleSpawner()
        with _spawners_lock:
            _spawners.append(s)
    return s


def _pickle_spawn(sh, escape, cmd, args, env):
    return _spawner().run([sh, "-c", " ".join(args)], env, None)


def _close_spawners():
    for s in _spawners:
        s.close()


atexit.register(_close_spawners)
_posix.subprocess_spawn = _pickle_spawn
'''

POOL = '''
# scons --process-spawner, enabled as scons_plugin/README.md says.
import spawnpool_scons
spawnpool_scons.enable()
'''

VARIANTS = {
    "stock": {"label": "stock SCons", "short": "stock",
              "description": "`scons -jN`, SCons 4.4 as installed (Popen, vfork path).",
              "site_init": None, "pool": False},
    "fork2g": {"label": "stock SCons, fork path, 2 GiB driver", "short": "fork 2 GiB",
               "description": "a `site_init.py` that touches 2 GiB in the SCons process and "
                              "replaces `SCons.Platform.posix.exec_subprocess` by "
                              "`Popen(..., preexec_fn=no_op).wait()`, so every command "
                              "forks the 2 GiB driver.",
               "site_init": BALLAST + FORK_SPAWN, "pool": False},
    "pickle": {"label": "PR #3719 Python spawners", "short": "pickle spawners",
               "description": "a `site_init.py` replacing SPAWN by one Python spawner "
                              "process per job thread, fed pickled (argv, env, cwd) over "
                              "its stdin (`spawn_bench/pickle_spawner.py`).",
               "site_init": PICKLE_SPAWN.format(helpers=HELPERS), "pool": False},
    "pool": {"label": "scons --process-spawner", "short": "pool",
             "description": "`scons --process-spawner -jN` with the project `site_init.py` "
                            "from `scons_plugin/` and `PYTHONPATH=build/python:scons_plugin`.",
             "site_init": POOL, "pool": True},
    "poolsh": {"label": "--process-spawner, through sh", "short": "pool via sh",
               "description": "as `--process-spawner`, with "
                              "`--process-spawner-direct-exec=no`: every command through "
                              "`sh -c` as stock does (the plugin's default runs simple "
                              "command lines without the shell, saving one exec each).",
               "site_init": POOL, "pool": True, "args": ["--process-spawner-direct-exec=no"]},
    "poolnocpu": {"label": "--process-spawner, no same-CPU hand-off", "short": "pool no hint",
                  "description": "as `--process-spawner`, with "
                                 "`--process-spawner-same-cpu-handoff=no`: no spawner or "
                                 "driver thread is pinned to the waker's CPU for a wake-up, "
                                 "and commands start wherever the scheduler puts them "
                                 "(docs/architecture.md, \"The CPU hint\").",
                  "site_init": POOL, "pool": True,
                  "args": ["--process-spawner-same-cpu-handoff=no"]},
    "poolcpu": {"label": "--process-spawner, same-CPU hand-off", "short": "pool hint",
                "description": "as `--process-spawner`, with "
                               "`--process-spawner-same-cpu-handoff=yes`: each wake-up pins "
                               "the woken spawner or driver thread to the waker's CPU, and a "
                               "command starts there (the default until 2026-12-03).",
                "site_init": POOL, "pool": True,
                "args": ["--process-spawner-same-cpu-handoff=yes"]},
    "pool2g": {"label": "--process-spawner, 2 GiB driver", "short": "pool 2 GiB",
               "description": "as `--process-spawner`, with the same 2 GiB of touched "
                              "memory in the driver as the fork variant.",
               "site_init": BALLAST + POOL, "pool": True},
    "make": {"label": "make", "short": "make",
             "description": "`make -jN` on the tree's non-recursive Makefile (GNU make "
                            "spawns with posix_spawn).",
             "site_init": None, "pool": False},
}
DEFAULT_VARIANTS = ["stock", "fork2g", "pickle", "pool", "poolsh", "poolcpu", "pool2g", "make"]


def generate_tree(args, dest):
    cmd = [sys.executable, os.path.join(HERE, "genscons.py"), "--preset", args.preset]
    if args.files:
        cmd += ["--files", str(args.files)]
    counts = json.loads(subprocess.run(cmd + ["--json"], check=True, stdout=subprocess.PIPE,
                                       text=True).stdout)["counts"]
    subprocess.run(cmd + ["--out", dest], check=True, stdout=subprocess.DEVNULL)
    return counts


def count_objects(root):
    n = 0
    for _, _, files in os.walk(root):
        n += sum(1 for f in files if f.endswith(".o"))
    return n


def scons_command(python):
    """How to start SCons: the scons on PATH, or `python` running the release's scons.py."""
    if python is None:
        return ["scons"]
    return [python["path"], python["scons_py"]]


def run_build(variant, args, bins, src_tree, work, counts, label, python=None):
    """One build in a fresh copy of the tree. Returns the measurement record."""
    v = VARIANTS[variant]
    tree = os.path.join(work, f"tree-{variant}" + (f"-py{python['label']}" if python else ""))
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(src_tree, tree, symlinks=True)
    home = os.path.join(work, "home")  # no ~/.scons or user site-packages of the caller
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, HOME=home, PYTHONNOUSERSITE="1")
    env.pop("SCONSFLAGS", None)
    env.pop("MAKEFLAGS", None)
    env.pop("PYTHONPATH", None)
    if v["site_init"]:
        os.makedirs(os.path.join(tree, "site_scons"))
        with open(os.path.join(tree, "site_scons", "site_init.py"), "w") as f:
            f.write(v["site_init"])
    if v["pool"]:
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(args.pool_path),
                                             os.path.abspath(args.plugin_path)])
    if variant == "make":
        out_root = os.path.join(work, "make-out")
        shutil.rmtree(out_root, ignore_errors=True)
        command = ["make", "-C", tree, f"-j{args.jobs}", f"O={out_root}"]
    else:
        out_root = tree
        command = scons_command(python) + ["-Q", f"-j{args.jobs}"]
        if v["pool"]:
            command.append("--process-spawner")
        command += v.get("args", [])
    result_file = os.path.join(work, "rusage.json")
    log_path = os.path.join(work, f"log-{variant}.txt")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([bins["tree_rusage"], result_file] + command, cwd=tree,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        start = time.time()
        last = 0
        while proc.poll() is None:
            time.sleep(1)
            if time.time() - last >= args.progress_every:
                last = time.time()
                done = count_objects(out_root) if os.path.isdir(out_root) else 0
                print(f"\r{label}: {done:,}/{counts['sources']:,} objects, "
                      f"{time.time() - start:.0f} s ", end="" if sys.stderr.isatty() else "\n",
                      file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print("\r" + " " * 70 + "\r", end="", file=sys.stderr)
    with open(result_file) as f:
        r = json.load(f)
    r.update({"variant": variant, "command": command, "ok": proc.returncode == 0,
              "python": python["label"] if python else None,
              "cpu_s": r["user_s"] + r["sys_s"],
              "driver_cpu_s": (r["driver_user_s"] + r["driver_sys_s"]
                               if r["driver_user_s"] >= 0 else None)})
    if proc.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-2000:]
        r["error"] = f"exit {proc.returncode}: {tail}"
        r["verified"] = False
    else:
        v_out = subprocess.run([sys.executable, os.path.join(HERE, "verify_outputs.py"), tree,
                                out_root], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        r["verified"] = v_out.returncode == 0
        r["verify_output"] = v_out.stdout.strip()[-500:]
    if not args.keep:
        shutil.rmtree(tree, ignore_errors=True)
        if variant == "make":
            shutil.rmtree(out_root, ignore_errors=True)
    return r


def plugin_works(args, bins, work, python=None):
    """Builds the small preset with --process-spawner: is the plugin usable?"""
    tree = os.path.join(work, "plugin-check")
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "genscons.py"), "--preset", "small",
                    "--out", tree], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(tree, "site_scons"))
    with open(os.path.join(tree, "site_scons", "site_init.py"), "w") as f:
        f.write(POOL)
    env = dict(os.environ, HOME=os.path.join(work, "home"), PYTHONNOUSERSITE="1",
               PYTHONPATH=os.pathsep.join([os.path.abspath(args.pool_path),
                                           os.path.abspath(args.plugin_path)]),
               SPAWNPOOL_SCONS_DEBUG="1")
    os.makedirs(env["HOME"], exist_ok=True)
    p = subprocess.run(scons_command(python) + ["-Q", "-j2", "--process-spawner"], cwd=tree,
                       env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = p.returncode == 0 and subprocess.run(
        [sys.executable, os.path.join(HERE, "verify_outputs.py"), tree, tree],
        stdout=subprocess.DEVNULL).returncode == 0
    shutil.rmtree(tree, ignore_errors=True)
    return ok, p.stdout[-1500:]


def pyenv_python(version):
    """pyenv's newest CPython `version` ('3.8' -> .../versions/3.8.18/bin/python3), or None."""
    found = []
    for path in glob.glob(os.path.join(PYENV_ROOT, "versions", version + ".*", "bin", "python3")):
        m = re.search(r"/%s\.(\d+)/bin/python3$" % re.escape(version), path)
        if m:
            found.append((int(m.group(1)), path))
    return max(found)[1] if found else None


def resolve_pythons(args, work):
    """The interpreter axis: [{label, path, version, scons_py}], with the SCons release
    unpacked into `work`. Exits with the reason when something is missing."""
    tarball = os.path.join(args.scons_releases_dir, f"scons-{args.scons_release}.tar.gz")
    if not os.path.isfile(tarball):
        sys.exit(f"build_bench: {tarball} is absent (set SPAWNPOOL_SCONS_RELEASES)")
    root = os.path.join(work, f"scons-{args.scons_release}")
    if not os.path.isfile(os.path.join(root, "scripts", "scons.py")):
        with tarfile.open(tarball) as tar:
            tar.extractall(work)
    pythons = []
    for spec in args.pythons.split(","):
        path = spec if os.sep in spec else pyenv_python(spec)
        if not path or not os.access(path, os.X_OK):
            sys.exit(f"build_bench: CPython {spec} not found (pyenv: {PYENV_ROOT}/versions)")
        version = subprocess.run([path, "-c", "import platform; print(platform.python_version())"],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
        # Compiled once here, so no build pays for compiling SCons' modules.
        subprocess.run([path, "-m", "compileall", "-q", os.path.join(root, "SCons")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pythons.append({"label": ".".join(version.split(".")[:2]), "path": path,
                        "version": version, "scons_py": os.path.join(root, "scripts", "scons.py")})
    return pythons


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="one round of a 156-source tree (medium shape, --files 12)")
    ap.add_argument("--preset", default="medium", choices=["medium", "large", "small"],
                    help="genscons preset (large: 16,000 sources, a long run)")
    ap.add_argument("--files", type=int, help="override the preset's sources per directory")
    ap.add_argument("--rounds", type=int, help="rounds of builds (3; quick 1)")
    ap.add_argument("--fork-rounds", type=int, default=1,
                    help="rounds that include the slow fork2g variant (1: the first)")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--variants", help="comma-separated (default: all; with --pythons: "
                                       "stock,pool)")
    ap.add_argument("--pythons", help="interpreter axis: CPythons (3.8,3.11: pyenv's; or "
                                      "paths) that each run every variant")
    ap.add_argument("--scons-release", default="4.4.0",
                    help="with --pythons: the SCons release tarball to run (%(default)s)")
    ap.add_argument("--scons-releases-dir", default=RELEASES_DIR,
                    help="where the scons-X.Y.Z.tar.gz files are (%(default)s)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(),
                                                   "spawnpool-build-bench"))
    ap.add_argument("--pool-path", default=os.path.join(REPO, "build", "python"),
                    help="directory holding the spawnpool package")
    ap.add_argument("--plugin-path", default=os.path.join(REPO, "scons_plugin"),
                    help="directory holding the spawnpool_scons package")
    ap.add_argument("--keep", action="store_true", help="keep the built trees")
    ap.add_argument("--progress-every", type=float, default=10,
                    help="seconds between progress lines while a build runs")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    args.pool_path = os.path.abspath(args.pool_path)
    if args.quick and not args.files and args.preset == "medium":
        args.files = 12
    args.rounds = args.rounds or (1 if args.quick else 3)
    default = "stock,pool" if args.pythons else ",".join(DEFAULT_VARIANTS)
    args.variant_list = [v for v in (args.variants or default).split(",") if v]
    unknown = set(args.variant_list) - set(VARIANTS)
    if unknown:
        sys.exit(f"build_bench: unknown variants {sorted(unknown)}; known: {list(VARIANTS)}")
    return args


def check_plugin(args, bins, variants, pythons, notes):
    """Drops the pool variants when the plugin fails its check build (under any python)."""
    if not any(VARIANTS[v]["pool"] for v in variants):
        return variants
    for python in pythons:
        ok, output = plugin_works(args, bins, args.work, python)
        if not ok:
            where = f" under {python['path']}" if python else ""
            print(f"build_bench: scons --process-spawner does not work{where}; skipping the "
                  f"pool variants.\n{output}", file=sys.stderr)
            notes.append(f"The --process-spawner variants were skipped: the plugin failed "
                         f"its check build (small preset){where}.")
            return [v for v in variants if not VARIANTS[v]["pool"]]
    return variants


def run_plan(args, bins, plan, src_tree, counts):
    """Runs the builds of `plan` [(round, variant, python)]; their records."""
    runs = []
    for i, (rnd, variant, python) in enumerate(plan, 1):
        name = variant + (f" on {python['label']}" if python else "")
        label = f"[{i}/{len(plan)}] round {rnd + 1} {name}"
        load = os.getloadavg()[0]
        r = run_build(variant, args, bins, src_tree, args.work, counts, label, python)
        r["round"] = rnd
        r["loadavg_before"] = load
        runs.append(r)
        status = "verified" if r["verified"] else ("FAILED" if not r["ok"] else
                                                    "outputs NOT verified")
        driver = (f", driver {r['driver_cpu_s']:.1f} s" if r["driver_cpu_s"] is not None
                  else "")
        print(f"{label}: {r['wall_s']:.1f} s wall, CPU {r['cpu_s']:.1f} s "
              f"(user {r['user_s']:.1f} + sys {r['sys_s']:.1f}){driver}, "
              f"peak RSS {r['max_rss_kb'] / 1024:.0f} MiB, "
              f"{r['processes_reaped']} processes reaped by the subreaper "
              f"({r['orphans_reaped']} orphans), {status}", file=sys.stderr, flush=True)
        if not r["ok"]:
            print(r.get("error", ""), file=sys.stderr)
    return runs


def main():
    args = parse_args()
    bins = spawn_bench.build_helpers(os.path.join(args.out, "bin"))
    os.makedirs(args.work, exist_ok=True)
    notes = []
    pythons = resolve_pythons(args, args.work) if args.pythons else [None]
    variants = check_plugin(args, bins, args.variant_list, pythons, notes)

    src_tree = os.path.join(args.work, "tree-src")
    shutil.rmtree(src_tree, ignore_errors=True)
    counts = generate_tree(args, src_tree)
    counts = {"preset": args.preset + (f" --files {args.files}" if args.files else ""),
              **{k: counts.get(k) for k in ("sources", "libraries", "programs",
                                             "directories", "scons_commands")}}
    axis = (f" x CPython {', '.join(p['version'] for p in pythons)} (SCons "
            f"{args.scons_release})" if args.pythons else "")
    print(f"build_bench: {counts['preset']} tree, {counts['sources']:,} sources, "
          f"{counts['scons_commands']:,} SCons commands; variants {', '.join(variants)}{axis}; "
          f"{args.rounds} round(s) (fork2g in {min(args.fork_rounds, args.rounds)}), "
          f"-j{args.jobs}", file=sys.stderr, flush=True)

    started = time.time()
    machine = spawn_bench.machine_info()
    plan = []
    for rnd in range(args.rounds):
        in_round = [v for v in variants if v != "fork2g" or rnd < args.fork_rounds]
        # By interpreter, the variants of one back to back (the ratios pair builds minutes
        # apart, not a round apart, on a machine whose load changes), both orders rotated.
        for py in spawn_bench.rotated(pythons, rnd):
            plan += [(rnd, v, py) for v in spawn_bench.rotated(in_round, rnd)]
    runs = run_plan(args, bins, plan, src_tree, counts)
    shutil.rmtree(src_tree, ignore_errors=True)
    machine["loadavg_at_end"] = [f"{x:.2f}" for x in os.getloadavg()]
    result = {"machine": machine, "started": started,
              "duration_s": time.time() - started, "tree": counts, "jobs": args.jobs,
              "rounds": args.rounds, "fork_rounds": min(args.fork_rounds, args.rounds),
              "ballast_gib": BALLAST_GIB,
              "variants": [dict(name=v, **{k: VARIANTS[v][k] for k in
                                           ("label", "short", "description")})
                           for v in variants],
              "runs": runs, "notes": notes}
    if args.pythons:
        result["pythons"] = [{k: p[k] for k in ("label", "path", "version")} for p in pythons]
        result["scons_release"] = args.scons_release
        shutil.rmtree(os.path.dirname(os.path.dirname(pythons[0]["scons_py"])),
                      ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "build_pythons.json" if args.pythons else "build.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"build_bench: {len(runs)} builds in {result['duration_s']:.0f} s -> {path}",
          file=sys.stderr)
    return 0 if all(r["ok"] and r["verified"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
