"""Commands that misbehave must not hang the pool or spoil other commands.

Each scenario runs on a 3-slot pool while a bystander thread keeps running a
well-behaved command (known text on stdout and stderr) in another slot; every bystander
result must be exact. Scenarios: a background grandchild that keeps stdout open; 100 MB
on stdout and on stderr; SIGTERM ignored (then SIGKILL, and close()); stdout closed by
the command; a command that moves into a session of its own with setsid.

Known limits, documented in docs/reliability.md: output a grandchild writes after the
command exited is not waited for (a late write gets EPIPE); without memory tracking, a
process that left the command's process group (setsid) is out of reach of cancel() and
close(), so these tests end it themselves. With a memory budget the slot's cgroup holds
it, and cancel() and close() reach it (the last test).
"""

import signal
import threading
import time

import pytest

import spawnpool
from reliability_support import cgroup_support, is_running, wait_until

PROMPT = 5.0  # seconds: "returns promptly" for commands whose leftovers live 30 s


class Bystander:
    """Runs `sh -c 'echo TOKEN; echo TOKEN >&2'` in a loop on `pool`, checking each."""

    def __init__(self, pool, tolerate_signals=False):
        self.pool, self.tolerate = pool, tolerate_signals
        self.runs, self.errors = 0, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop.is_set():
            token = f"bystander-{self.runs}"
            try:
                r = self.pool.run(["/bin/sh", "-c", 'echo "$0"; echo "$0" >&2', token],
                                  capture=True)
            except spawnpool.SpawnError as e:
                if not self.stop.is_set():
                    self.errors.append(f"run {self.runs}: {e!r}")
                return
            expected = (token + "\n").encode()
            if r.returncode == 0:
                if (r.stdout, r.stderr) != (expected, expected):
                    self.errors.append(f"run {self.runs}: {r.stdout!r} {r.stderr!r}")
            elif not (self.tolerate and r.returncode in (-signal.SIGTERM, -signal.SIGKILL)):
                self.errors.append(f"run {self.runs}: returncode {r.returncode}")
            self.runs += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the bystander hangs"
        assert self.runs > 0, "the bystander never got a slot"
        assert not self.errors, self.errors
        return False


def read_pid(path):
    assert wait_until(lambda: path.exists() and path.read_text().strip(), timeout=10), path
    return int(path.read_text().split()[0])


def timed_run(pool, argv, **kwargs):
    started = time.monotonic()
    r = pool.run(argv, **kwargs)
    return r, time.monotonic() - started


@pytest.mark.parametrize("output", ["capture", "merged", "passthrough"])
def test_background_grandchild_holding_stdout(make_pool, pids, tmp_path, output):
    pool = make_pool(slots=3)
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 30 & echo $! > {pidfile}; echo started; echo also >&2"
    with Bystander(pool):
        r, took = timed_run(pool, ["/bin/sh", "-c", script], capture=output != "passthrough",
                            merge_stderr=output == "merged")
        pids.add(read_pid(pidfile))
    assert r.returncode == 0
    assert took < PROMPT, f"run() took {took:.1f} s: it waited for the grandchild"
    if output == "capture":
        assert (r.stdout, r.stderr) == (b"started\n", b"also\n")
    elif output == "merged":
        assert r.stdout == b"started\nalso\n" and r.stderr is None
    # The slot is fine for the next command.
    assert pool.run(["/bin/echo", "next"], capture=True).stdout == b"next\n"


def test_100_mb_on_stdout_and_on_stderr_captured(make_pool):
    size = 100 * 1000 * 1000
    pool = make_pool(slots=3)
    # Both streams written at once, so both pipes must be drained all along.
    script = ("head -c $0 /dev/zero | tr '\\000' o & "
              "head -c $0 /dev/zero | tr '\\000' e >&2; wait")
    with Bystander(pool):
        r = pool.run(["/bin/sh", "-c", script, str(size)], capture=True)
    assert r.returncode == 0
    assert len(r.stdout) == size and len(r.stderr) == size
    assert r.stdout.count(b"o") == size and r.stderr.count(b"e") == size


def test_10_mb_merged_keeps_every_byte(make_pool):
    size = 10 * 1000 * 1000
    pool = make_pool(slots=2)
    script = "head -c $0 /dev/zero | tr '\\000' o & head -c $0 /dev/zero | tr '\\000' e >&2; wait"
    r = pool.run(["/bin/sh", "-c", script, str(size)], capture=True, merge_stderr=True)
    assert r.returncode == 0 and r.stderr is None
    assert len(r.stdout) == 2 * size and r.stdout.count(b"e") == size


def start_in_thread(pool, argv, **kwargs):
    """Runs argv on `pool` in a thread; returns (thread, box) where box gets the result
    or the exception."""
    box = {}

    def target():
        try:
            box["result"] = pool.run(argv, **kwargs)
        except Exception as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def stubborn(tmp_path):
    """A command that ignores SIGTERM (its sleep inherits the ignored disposition)."""
    pidfile = tmp_path / "stubborn.pid"
    return ["/bin/sh", "-c", f"trap '' TERM; sleep 30 & echo $! > {pidfile}; wait"], pidfile


def test_command_ignoring_sigterm_is_cancelled_with_sigkill(make_pool, pids, tmp_path):
    pool = make_pool(slots=3)
    argv, pidfile = stubborn(tmp_path)
    with Bystander(pool, tolerate_signals=True):
        thread, box = start_in_thread(pool, argv, capture=True)
        sleeper = read_pid(pidfile)
        pids.add(sleeper)
        pool.cancel(signal.SIGTERM)
        thread.join(timeout=0.5)
        assert thread.is_alive() and is_running(sleeper), "SIGTERM was not ignored?"
        pool.cancel(signal.SIGKILL)
        thread.join(timeout=PROMPT)
        assert not thread.is_alive(), "SIGKILL did not end the command"
    assert "result" in box, box
    assert box["result"].returncode == -signal.SIGKILL
    assert wait_until(lambda: not is_running(sleeper), timeout=2), "the group was not killed"


def test_close_returns_promptly_with_a_command_ignoring_sigterm(make_pool, pids, tmp_path):
    pool = make_pool(slots=2)
    argv, pidfile = stubborn(tmp_path)
    thread, box = start_in_thread(pool, argv, capture=True)
    sleeper = read_pid(pidfile)
    pids.add(sleeper)
    started = time.monotonic()
    pool.close()
    took = time.monotonic() - started
    thread.join(timeout=PROMPT)
    assert took < 2.0, f"close() took {took:.1f} s"
    assert not thread.is_alive()
    # Either the spawner was gone before it replied (SpawnError, its death or the close
    # seen first), or it reported its command's death first: killed by SIGKILL. Both are
    # a failed command.
    if "error" in box:
        assert isinstance(box["error"], spawnpool.SpawnError), box
        assert box["error"].stage in ("spawner_died", "pool_closed"), box
    else:
        assert box["result"].returncode == -signal.SIGKILL, box
    assert wait_until(lambda: not is_running(sleeper), timeout=2)


@pytest.mark.parametrize("script,returncode,out,err", [
    ("exec 1>&-; sleep 0.3; echo err >&2; exit 3", 3, b"", b"err\n"),
    ("echo out; exec 2>&-; sleep 0.3; echo more; exit 4", 4, b"out\nmore\n", b""),
    ("exec 1>&- 2>&-; sleep 0.3; exit 5", 5, b"", b""),
])
def test_command_closing_its_output(make_pool, script, returncode, out, err):
    pool = make_pool(slots=3)
    with Bystander(pool):
        r, took = timed_run(pool, ["/bin/sh", "-c", script], capture=True)
        passthrough = pool.run(["/bin/sh", "-c", script], capture=False)
    assert (r.returncode, r.stdout, r.stderr) == (returncode, out, err)
    assert took < PROMPT
    assert passthrough.returncode == returncode


def test_command_in_its_own_session(make_pool, pids, tmp_path):
    pool = make_pool(slots=3)
    pidfile = tmp_path / "session.pid"
    with Bystander(pool, tolerate_signals=True):
        # setsid -w: the command waits for its child in a new session.
        r = pool.run(["setsid", "-w", "/bin/sh", "-c", "echo inside; exit 6"], capture=True)
        assert (r.returncode, r.stdout) == (6, b"inside\n")

        # Without -w the new session outlives the command and holds its stdout (it writes
        # nothing: once the command is done, a late write would get EPIPE).
        r, took = timed_run(pool, ["setsid", "/bin/sh", "-c",
                                   f"echo $$ > {pidfile}; exec sleep 30"], capture=True)
        escaped = read_pid(pidfile)
        pids.add(escaped)
        assert (r.returncode, r.stdout) == (0, b"") and took < PROMPT

        # Cancelling a command whose child left the group ends the command promptly;
        # the escaped child is beyond reach (documented), the test kills it.
        pidfile2 = tmp_path / "session2.pid"
        thread, box = start_in_thread(
            pool, ["/bin/sh", "-c", f"setsid sh -c 'echo $$ > {pidfile2}; exec sleep 30' & wait"],
            capture=True)
        pids.add(read_pid(pidfile2))
        pool.cancel(signal.SIGTERM)
        thread.join(timeout=PROMPT)
        assert not thread.is_alive()
        assert box["result"].returncode == -signal.SIGTERM
    assert is_running(escaped), "the escaped process was expected to survive the cancel"


def test_own_session_is_within_reach_with_memory(make_pool, pids, tmp_path):
    with cgroup_support.TestCgroup() as cgroup:
        pool = make_pool(slots=2, memory_budget="auto", cgroup_parent=cgroup.path)
        pidfile = tmp_path / "session.pid"
        thread, box = start_in_thread(
            pool, ["/bin/sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' & wait"],
            capture=True)
        escaped = read_pid(pidfile)
        pids.add(escaped)
        pool.cancel(signal.SIGTERM)
        thread.join(timeout=PROMPT)
        assert not thread.is_alive()
        assert box["result"].returncode == -signal.SIGTERM
        assert wait_until(lambda: not is_running(escaped), timeout=PROMPT), \
            "cancel() did not reach the process in a session of its own"

        # A command that ended left a session behind in its slot: close() ends it.
        pidfile2 = tmp_path / "session2.pid"
        r = pool.run(["setsid", "/bin/sh", "-c", f"echo $$ > {pidfile2}; exec sleep 30"],
                     capture=True)
        assert r.returncode == 0
        escaped = read_pid(pidfile2)
        pids.add(escaped)
        assert is_running(escaped)
        pool.close()
        assert not is_running(escaped), "close() did not reach the process left in the slot"
        assert not cgroup.children()
