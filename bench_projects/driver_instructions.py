#!/usr/bin/python3
"""The driver's work per command, in instructions: `spawnpool run` under callgrind (the
driver process only; the spawners and commands are other processes, not traced), with
--small and --large commands of `/bin/true N`; per command = the difference over the
difference in commands, so start-up and shut-down cancel out. Instruction counts do not
depend on the machine's load, so this runs on a shared machine; it measures the driver's
CPU per command (issue 19's Numbers), not its time.

  plain     the defaults (direct exec)
  features  --output=sync --trace --stats, under a make jobserver (fifo style, -j2)

Each --pythonpath is one build of the package (build/python of a checkout): give two
(before, after) for the ratio, side by side in one run.

usage: driver_instructions.py --pythonpath DIR [--pythonpath DIR] [--small N] [--large N]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

VARIANTS = {
    "plain": [],
    "features": ["--output=sync", "--trace=trace.json", "--stats", "--jobserver=yes"],
}


def instructions(pythonpath, variant, commands, work):
    """Instructions the driver ran for `commands` commands."""
    lines = "".join("/bin/true %d\n" % i for i in range(commands))
    with open(os.path.join(work, "cmds"), "w") as f:
        f.write(lines)
    fifo = os.path.join(work, "jobserver")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # holds the fifo open; one token
    try:
        while True:  # empty what an earlier run left, then give one token (-j2)
            try:
                if not os.read(keep, 64):
                    break
            except BlockingIOError:
                break
        os.write(keep, b"+")
        env = dict(os.environ, PYTHONPATH=os.path.abspath(pythonpath), NO_COLOR="1", TERM="dumb")
        if variant == "features":
            env["MAKEFLAGS"] = "-j2 --jobserver-auth=fifo:%s" % fifo
        else:
            env.pop("MAKEFLAGS", None)
        out = os.path.join(work, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                        sys.executable, "-m", "spawnpool", "run", "-j", "2"]
                       + VARIANTS[variant] + ["cmds"],
                       cwd=work, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out) as f:
            total = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
        return int(total.group(1))
    finally:
        os.close(keep)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pythonpath", action="append", required=True)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("driver_instructions: needs valgrind")
    per_command = {}
    work = tempfile.mkdtemp(prefix="spawnpool-driver-instructions-")
    try:
        for path in args.pythonpath:
            for variant in VARIANTS:
                small = instructions(path, variant, args.small, work)
                large = instructions(path, variant, args.large, work)
                per_command[path, variant] = (large - small) / (args.large - args.small)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| build | variant | instructions per command |" +
          (" ratio to the first build |" if len(args.pythonpath) > 1 else ""))
    print("|---|---|---|" + ("---|" if len(args.pythonpath) > 1 else ""))
    first = args.pythonpath[0]
    for path in args.pythonpath:
        for variant in VARIANTS:
            value = per_command[path, variant]
            ratio = " %.2fx |" % (value / per_command[first, variant]) \
                if len(args.pythonpath) > 1 else ""
            print("| %s | %s | %.0f |%s" % (path, variant, value, ratio))


if __name__ == "__main__":
    main()
