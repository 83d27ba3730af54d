"""The spawnpool Python module: its API contract, failures as data (and as exceptions in
the Popen-style form), threads calling run() at once with the GIL released, and a spawn
cost that does not grow with the driver's memory. Leak checks run after every test
(conftest.py)."""

import errno
import os
import pathlib
import signal
import statistics
import sys
import threading
import time

import pytest

import spawnpool
from spawnpool_test_support import command_of, process_gone, wait_until

TRUE = "/bin/true"


# --- the API contract ------------------------------------------------------------------

def test_pool_is_a_context_manager_that_closes():
    with spawnpool.Pool(slots=3) as pool:
        assert pool.slots == 3
        spawners = pool.spawner_pids
        assert len(spawners) == 3
        assert pool.run([TRUE]).returncode == 0
    assert pool.spawner_pids == []
    for pid in spawners:
        assert process_gone(pid)
    pool.close()  # idempotent


def test_run_after_close_raises_spawn_error():
    pool = spawnpool.Pool(slots=1)
    pool.close()
    with pytest.raises(spawnpool.SpawnError) as info:
        pool.run([TRUE])
    assert info.value.stage == "pool_closed"
    assert not isinstance(info.value, spawnpool.SpawnerDied)
    r = pool.run(spawnpool.Command([TRUE]))
    assert (r.started, r.failure, r.returncode) == (False, "pool_closed", -1)
    assert r.error_message == "the pool is closed"


def test_result_fields_without_capture():
    with spawnpool.Pool(slots=1) as pool:
        r = pool.run(["sh", "-c", "exit 3"])
    assert r.returncode == 3
    assert r.stdout is None
    assert r.stderr is None
    for name in ("user_time", "system_time", "wall_time"):
        assert isinstance(getattr(r, name), float)
        assert getattr(r, name) >= 0
    assert isinstance(r.max_rss_kb, int) and r.max_rss_kb > 0
    assert r.submitted_ns <= r.started_ns <= r.exited_ns <= r.completed_ns
    assert repr(r) == "<spawnpool.Result returncode=3>"


def test_passthrough_output_goes_to_the_drivers_fds(capfd):
    with spawnpool.Pool(slots=1) as pool:
        r = pool.run(["sh", "-c", "printf to-out; printf to-err >&2"])
    assert r.returncode == 0 and r.stdout is None
    out, err = capfd.readouterr()
    assert out == "to-out"
    assert err == "to-err"


def test_captured_output_is_bytes():
    with spawnpool.Pool(slots=1) as pool:
        r = pool.run(["sh", "-c", "printf 'out\\0put'; printf err >&2; exit 7"], capture=True)
        merged = pool.run(["sh", "-c", "printf 1; printf 2 >&2; printf 3"], capture=True,
                          merge_stderr=True)
        empty = pool.run([TRUE], capture=True)
    assert (r.returncode, r.stdout, r.stderr) == (7, b"out\0put", b"err")
    assert (merged.stdout, merged.stderr) == (b"123", None)
    assert (empty.stdout, empty.stderr) == (b"", b"")


def test_large_captured_output_is_exact():
    size = 10 * 1000 * 1000
    with spawnpool.Pool(slots=1, output_chunk_bytes=1 << 16) as pool:
        r = pool.run(["head", "-c", str(size), "/dev/urandom"], capture=True)
        check = pool.run(["sha256sum"], capture=True)  # nothing to read: /dev/null
    assert r.returncode == 0
    assert len(r.stdout) == size
    assert check.stdout.startswith(b"e3b0c442")  # sha256 of no input: stdin is /dev/null


def test_signal_gives_negative_returncode():
    with spawnpool.Pool(slots=1) as pool:
        assert pool.run(["sh", "-c", "kill -TERM $$"]).returncode == -signal.SIGTERM
        assert pool.run(["sh", "-c", "kill -KILL $$"]).returncode == -signal.SIGKILL


def test_env_is_complete_and_accepts_str_and_bytes():
    with spawnpool.Pool(slots=1) as pool:
        r = pool.run(["/usr/bin/env"], env={"A": "1", b"B": b"\xff", "C": ""}, capture=True)
        assert sorted(r.stdout.splitlines()) == [b"A=1", b"B=\xff", b"C="]
        os.environ["SPAWNPOOL_PY_TEST"] = "inherited"
        try:
            r = pool.run(["/usr/bin/env"], capture=True)
        finally:
            del os.environ["SPAWNPOOL_PY_TEST"]
        assert b"SPAWNPOOL_PY_TEST=inherited" in r.stdout.splitlines()
        with pytest.raises(ValueError):
            pool.run([TRUE], env={"A=B": "1"})
        with pytest.raises(ValueError):
            pool.run([TRUE], env={"": "1"})


def test_path_comes_from_the_commands_env(tmp_path):
    tool = tmp_path / "sp-py-tool"
    tool.write_text("#!/bin/sh\nexit 42\n")
    tool.chmod(0o755)
    with spawnpool.Pool(slots=1) as pool:
        assert pool.run(["sp-py-tool"], env={"PATH": str(tmp_path)}).returncode == 42
        with pytest.raises(spawnpool.SpawnError) as info:
            pool.run(["sp-py-tool"], env={"PATH": "/usr/bin:/bin"})
        assert info.value.errno == errno.ENOENT


def test_cwd(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    with spawnpool.Pool(slots=1) as pool:
        r = pool.run(["pwd", "-P"], cwd=tmp_path / "sub", capture=True)
        assert r.stdout == bytes(tmp_path.resolve() / "sub") + b"\n"
        r = pool.run(["pwd", "-P"], cwd=str(tmp_path).encode(), capture=True)
        assert r.stdout == bytes(tmp_path.resolve()) + b"\n"
        monkeypatch.chdir(tmp_path)  # after the pool started
        r = pool.run(["pwd", "-P"], capture=True)
        assert r.stdout == bytes(tmp_path.resolve()) + b"\n"
        r = pool.run(["pwd", "-P"], cwd="sub", capture=True)
        assert r.stdout == bytes(tmp_path.resolve() / "sub") + b"\n"


def test_argv_must_be_a_sequence():
    with spawnpool.Pool(slots=1) as pool:
        with pytest.raises(TypeError):
            pool.run("true")
        assert pool.run([pathlib.Path(TRUE)]).returncode == 0


# --- errors ------------------------------------------------------------------------------

def test_spawn_errors(tmp_path):
    (tmp_path / "file").write_text("not a program\n")
    missing_dir = str(tmp_path / "missing-dir")
    cases = [
        # argv, cwd, errno, stage, filename
        (["spawnpool-no-such-program"], None, errno.ENOENT, "exec", "spawnpool-no-such-program"),
        ([str(tmp_path / "missing")], None, errno.ENOENT, "exec", str(tmp_path / "missing")),
        ([str(tmp_path / "file")], None, errno.EACCES, "exec", str(tmp_path / "file")),
        ([str(tmp_path)], None, errno.EACCES, "exec", str(tmp_path)),
        ([TRUE], missing_dir, errno.ENOENT, "chdir", missing_dir),
        ([TRUE], str(tmp_path / "file"), errno.ENOTDIR, "chdir", str(tmp_path / "file")),
        (["echo", "a\0b"], None, errno.EINVAL, "request", None),
        # E2BIG names the program, as Popen's OSError does.
        ([TRUE, "x" * (128 * 1024)], None, errno.E2BIG, "request", TRUE),
        ([TRUE] + ["y" * 100000] * 30, None, errno.E2BIG, "request", TRUE),
    ]
    with spawnpool.Pool(slots=1) as pool:
        for argv, cwd, code, stage, filename in cases:
            r = pool.run(spawnpool.Command(argv, cwd=cwd))   # failures are data
            assert (r.started, r.failure, r.error_number, r.returncode) == (
                False, stage, code, -1), argv[0][:40]
            assert r.error_message
            with pytest.raises(spawnpool.SpawnError) as info:
                pool.run(argv, cwd=cwd)                    # the Popen-style form raises
            e = info.value
            assert isinstance(e, OSError)
            assert not isinstance(e, spawnpool.SpawnerDied)
            assert (e.errno, e.stage, e.filename) == (code, stage, filename), argv[0][:40]
            assert e.strerror == os.strerror(code)         # what Popen's would say
            assert str(e) == r.error_message               # the engine's sentence
        assert pool.run([TRUE]).returncode == 0  # the pool is fine


def test_spawner_killed_mid_command_raises_spawner_died():
    with spawnpool.Pool(slots=1) as pool:
        spawner = pool.spawner_pids[0]
        outcome = {}

        def run():
            try:
                outcome["result"] = pool.run(["sleep", "30"])
            except BaseException as e:  # noqa: B902 - reported below
                outcome["error"] = e

        caller = threading.Thread(target=run)
        caller.start()
        command = command_of(spawner, "sleep")
        assert command
        os.kill(spawner, signal.SIGKILL)
        caller.join(10)
        assert not caller.is_alive()
        e = outcome.get("error")
        assert isinstance(e, spawnpool.SpawnerDied), outcome
        assert isinstance(e, spawnpool.SpawnError) and isinstance(e, OSError)
        assert e.stage == "spawner_died"
        assert f"spawner process {spawner}" in str(e)
        assert wait_until(lambda: process_gone(command))
        # A replacement spawner serves the next command.
        assert pool.run([TRUE]).returncode == 0
        assert pool.spawner_pids != [spawner]


def test_cancel_signals_every_running_command():
    with spawnpool.Pool(slots=2) as pool:
        results = []
        callers = [threading.Thread(target=lambda: results.append(pool.run(["sleep", "30"])))
                   for _ in range(2)]
        for t in callers:
            t.start()
        for spawner in pool.spawner_pids:
            assert command_of(spawner, "sleep")
        pool.cancel()
        for t in callers:
            t.join(10)
        assert [r.returncode for r in results] == [-signal.SIGTERM] * 2


def test_exception_from_a_signal_handler_interrupts_the_command():
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    old = signal.signal(signal.SIGALRM, handler)
    try:
        with spawnpool.Pool(slots=1) as pool:
            start = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(Interrupted):
                pool.run(["sleep", "30"])
            assert time.monotonic() - start < 10
            assert pool.run([TRUE]).returncode == 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --- threads -----------------------------------------------------------------------------

def test_eight_threads_call_run_at_once():
    threads, runs = 8, 25
    barrier = threading.Barrier(threads)
    wrong = []
    with spawnpool.Pool(slots=2) as pool:
        def caller(n):
            barrier.wait()
            for i in range(runs):
                token = f"{n}-{i}"
                r = pool.run(["sh", "-c", 'printf "$0"; exit $1', token, str(i)], capture=True)
                if (r.returncode, r.stdout, r.stderr) != (i, token.encode(), b""):
                    wrong.append((token, r.returncode, r.stdout, r.stderr))

        workers = [threading.Thread(target=caller, args=(n,)) for n in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    assert wrong == []


@pytest.mark.parametrize("runner", ["main thread", "worker thread"])
def test_the_gil_is_released_while_a_command_runs(runner):
    progress = {"count": 0, "max_gap": 0.0}
    stop = threading.Event()

    def count():
        last = time.monotonic()
        while not stop.is_set():
            progress["count"] += 1
            now = time.monotonic()
            progress["max_gap"] = max(progress["max_gap"], now - last)
            last = now

    with spawnpool.Pool(slots=1) as pool:
        def run():
            return pool.run(["sleep", "0.5"])

        if runner == "main thread":
            counter = threading.Thread(target=count)
            counter.start()
            time.sleep(0.05)
            before = progress["count"]
            progress["max_gap"] = 0.0
            r = run()
            during = progress["count"] - before
            stop.set()
            counter.join()
        else:
            result = {}
            worker = threading.Thread(target=lambda: result.update(r=run()))
            worker.start()
            time.sleep(0.05)
            before = progress["count"]
            deadline = time.monotonic() + 0.3  # the worker's command is still running
            last = time.monotonic()
            while time.monotonic() < deadline:
                progress["count"] += 1
                now = time.monotonic()
                progress["max_gap"] = max(progress["max_gap"], now - last)
                last = now
            during = progress["count"] - before
            worker.join()
            r = result["r"]
    assert r.returncode == 0
    print(f"\n{runner}: {during} iterations while the command ran, "
          f"longest stall {progress['max_gap'] * 1000:.1f} ms")
    assert during > 1000
    assert progress["max_gap"] < 0.4  # holding the GIL would stall it for the whole 0.5 s


def test_a_thousand_runs_from_four_threads_on_two_slots():
    threads, total = 4, 1000
    codes = []
    lock = threading.Lock()
    with spawnpool.Pool(slots=2) as pool:
        def caller():
            mine = [pool.run([TRUE]).returncode for _ in range(total // threads)]
            with lock:
                codes.extend(mine)

        start = time.perf_counter()
        workers = [threading.Thread(target=caller) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        elapsed = time.perf_counter() - start
    print(f"\n{total} x {TRUE} on 2 slots from {threads} threads: {elapsed:.2f} s, "
          f"{elapsed / total * 1000:.2f} ms per run")
    assert len(codes) == total
    assert set(codes) == {0}


# --- driver size -------------------------------------------------------------------------

def mem_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def median_run_ms(runs):
    """Median wall time of one run of /bin/true through a pool started now."""
    with spawnpool.Pool(slots=1) as pool:
        for _ in range(10):  # warm up
            pool.run([TRUE])
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            assert pool.run([TRUE]).returncode == 0
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def test_spawn_cost_does_not_grow_with_driver_memory():
    size = 4 << 30
    if mem_available_bytes() < 6 << 30:
        pytest.skip(f"needs 6 GiB available for a 4 GiB driver, "
                    f"has {mem_available_bytes() / (1 << 30):.1f} GiB")
    runs = 300
    small = median_run_ms(runs)
    ballast = bytearray(size)
    try:
        ballast[::4096] = b"\x01" * (size // 4096)  # touch every page
        with open("/proc/self/status") as f:
            rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        assert rss_kb > 4 << 20
        big = median_run_ms(runs)
    finally:
        del ballast
    print(f"\nmedian per-run cost of {TRUE} over {runs} runs: {small:.3f} ms with a small "
          f"driver, {big:.3f} ms with a {rss_kb / (1 << 20):.1f} GiB driver "
          f"(ratio {big / small:.2f})")
    assert big / small < 3


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-s"]))


def _allowed_cpus(status_text):
    for line in status_text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list in " + status_text)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("handoff", [True, False])
def test_the_same_cpu_handoff_pins_nobody_for_longer_than_a_wake_up(handoff):
    """Each hand-off pins the side it wakes to the waker's CPU (same_cpu_handoff): the
    spawner for the request, the waiting driver thread for the reply. Each side must get
    its own CPU set back, and the command the spawner's whole set, with the driver thread
    free and with it pinned to one CPU after the pool started."""
    everything = os.sched_getaffinity(0)
    one_cpu = max(everything)
    with spawnpool.Pool(slots=1, same_cpu_handoff=handoff) as pool:
        spawner = pool.spawner_pids[0]
        spawner_cpus = _allowed_cpus(pathlib.Path(f"/proc/{spawner}/status").read_text())
        assert spawner_cpus != str(one_cpu)
        try:
            for driver_cpus in (everything, {one_cpu}, everything):
                os.sched_setaffinity(0, driver_cpus)
                for _ in range(20):
                    r = pool.run(["cat", "/proc/self/status"], capture=True)
                    assert r.returncode == 0
                    assert _allowed_cpus(r.stdout.decode()) == spawner_cpus
                    assert os.sched_getaffinity(0) == driver_cpus
                    # Failure replies take the same way back.
                    with pytest.raises(spawnpool.SpawnError):
                        pool.run(["spawnpool-test-no-such-program"], env={"PATH": "/nonexistent"})
                    assert os.sched_getaffinity(0) == driver_cpus
        finally:
            os.sched_setaffinity(0, everything)
        # The spawner gives the pin back right after it starts a command, or before it
        # answers a failed one: between commands it holds its whole set again.
        assert _allowed_cpus(pathlib.Path(f"/proc/{spawner}/status").read_text()) == spawner_cpus
