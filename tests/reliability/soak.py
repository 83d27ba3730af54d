#!/usr/bin/python3
"""Soak: many commands through one pool from many threads, then a leak check.

    PYTHONPATH=build/python /usr/bin/python3 tests/reliability/soak.py [--commands N]
        [--slots 8] [--threads 16]

Run by scripts/soak (100,000 commands) and, short, by test_soak.py. A warm-up of
`--warmup` commands comes first (every spawner and thread has run something); then the
driver's and each spawner's descriptors, threads and RSS are sampled from /proc, the
commands run, and the same figures are sampled again. Commands cycle through captured
stdout, stderr with an exit status, merged output, passthrough, and a missing program
(a SpawnError); every result is checked. Prints one JSON object; exits 1 on any failure.
"""

import argparse
import errno
import json
import os
import sys
import threading
import time

import spawnpool

# Growth allowed between the two samples. Descriptors and threads must not change at
# all; RSS moves a little with allocator caches, so only growth beyond these counts.
RSS_SLACK_KB = {"driver": 8 * 1024, "spawner": 1024}


def read_sample(pid):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": int(status["Threads"]),
            "rss_kb": int(status["VmRSS"].split()[0])}


def sample(pid):
    """A sample once descriptor and thread counts hold still for 50 ms (at most 2 s): a
    joined Python thread may still be exiting at the OS level for a moment."""
    last = read_sample(pid)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = read_sample(pid)
        if (now["fds"], now["threads"]) == (last["fds"], last["threads"]):
            return now
        last = now
    return last


def zombie_children(parents):
    """(parent, child) pairs for zombie children of any pid in `parents`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) in parents:
            found.append((int(fields[1]), int(entry)))
    return found


def command(i):
    """(kind, run keyword arguments, check) for command number i."""
    kind = i % 10
    if kind <= 5:
        token = f"c{i}"
        return ("stdout", dict(argv=["/bin/echo", token], capture=True),
                lambda r: r.returncode == 0 and r.stdout == f"{token}\n".encode()
                and r.stderr == b"")
    if kind == 6:
        return ("stderr+status",
                dict(argv=["/bin/sh", "-c", 'echo "$1" >&2; exit $(($2 % 256))', "sh",
                           f"e{i}", str(i)], capture=True),
                lambda r: r.returncode == i % 256 and r.stdout == b""
                and r.stderr == f"e{i}\n".encode())
    if kind == 7:
        return ("merged", dict(argv=["/bin/sh", "-c", "echo a; echo b >&2"], capture=True,
                               merge_stderr=True),
                lambda r: r.returncode == 0 and r.stdout == b"a\nb\n" and r.stderr is None)
    if kind == 8:
        return ("passthrough", dict(argv=["/bin/sh", "-c", "exit 3"]),
                lambda r: r.returncode == 3 and r.stdout is None)
    if i % 100 == 99:
        return ("missing program", dict(argv=["/nonexistent/spawnpool-soak"]), None)
    return ("true", dict(argv=["/bin/true"], capture=True),
            lambda r: r.returncode == 0 and r.stdout == b"")


def run_commands(pool, first, count, threads, failures, kinds):
    """Runs commands first..first+count-1 from `threads` threads."""
    next_index = [first]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_index[0]
                if i >= first + count:
                    return
                next_index[0] += 1
            kind, kwargs, check = command(i)
            try:
                r = pool.run(**kwargs)
                ok = check is not None and check(r)
                detail = f"returncode {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}"
            except spawnpool.SpawnError as e:
                ok = check is None and e.errno == errno.ENOENT and e.stage == "exec"
                detail = repr(e)
            with lock:
                kinds[kind] = kinds.get(kind, 0) + 1
                if not ok:
                    failures.append(f"command {i} ({kind}): {detail}")

    pool_threads = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool_threads:
        t.start()
    for t in pool_threads:
        t.join()


def compare(name, before, after, slack_kb):
    problems = []
    for key in ("fds", "threads"):
        if after[key] != before[key]:
            problems.append(f"{name}: {key} {before[key]} -> {after[key]}")
    if after["rss_kb"] - before["rss_kb"] > slack_kb:
        problems.append(f"{name}: RSS {before['rss_kb']} -> {after['rss_kb']} kB")
    return problems


def soak(commands, slots, threads, warmup):
    failures, kinds = [], {}
    pool = spawnpool.Pool(slots=slots)
    spawners = list(pool.spawner_pids)
    run_commands(pool, 0, warmup, threads, failures, kinds)
    # The worker threads are gone again here and at the second sample alike.
    before = {"driver": sample(os.getpid()), **{str(p): sample(p) for p in spawners}}
    started = time.monotonic()
    run_commands(pool, warmup, commands, threads, failures, kinds)
    seconds = time.monotonic() - started
    after = {"driver": sample(os.getpid()), **{str(p): sample(p) for p in spawners}}

    problems = list(failures[:20])
    if len(failures) > 20:
        problems.append(f"... {len(failures) - 20} more failed commands")
    for name in before:
        slack = RSS_SLACK_KB["driver" if name == "driver" else "spawner"]
        problems += compare(name if name == "driver" else f"spawner {name}", before[name],
                            after[name], slack)
    if list(pool.spawner_pids) != spawners:
        problems.append(f"spawners replaced: {spawners} -> {pool.spawner_pids}")
    zombies = zombie_children(set(spawners) | {os.getpid()})
    if zombies:
        problems.append(f"zombies (parent, child): {zombies}")
    pool.close()
    try:
        leftover = os.waitpid(-1, os.WNOHANG)
        problems.append(f"a child is left after close(): {leftover}")
    except ChildProcessError:
        pass  # no child at all, hence no zombie
    return {"commands": commands, "warmup": warmup, "slots": slots, "threads": threads,
            "seconds": round(seconds, 2), "commands_per_second": round(commands / seconds),
            "kinds": kinds, "before": before, "after": after, "failed_commands": len(failures),
            "problems": problems}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=100_000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=None,
                        help="commands before the first sample (default: 2%%, at least 200)")
    args = parser.parse_args()
    warmup = args.warmup if args.warmup is not None else max(200, args.commands // 50)
    report = soak(args.commands, args.slots, args.threads, warmup)
    print(json.dumps(report, indent=1))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
