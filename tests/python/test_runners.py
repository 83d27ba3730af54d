"""The runner interface: run(Command) -> Result for the pool, PopenRunner and FakeRunner;
Command's defaults; the layers and the session built from the options spec; the
Popen-style wrapper. Leak checks run after every test (conftest.py)."""

import argparse
import errno
import io
import json
import os
import pathlib
import shutil
import signal
import threading

import pytest

import spawnpool
from spawnpool import CAPTURE, CAPTURE_MERGED, PASSTHROUGH, Command, PopenRunner, Result
from spawnpool import options, popen_style
from spawnpool.direct_exec import DirectExec
from spawnpool.stack import Session
from spawnpool.testing import FakeRunner, RecordingPrinter

ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


# --- the same Command, the same Result, from every runner --------------------------------

CASES = [
    # argv, output, (returncode, stdout, stderr)
    (["sh", "-c", "printf out; printf err >&2; exit 3"], CAPTURE, (3, b"out", b"err")),
    (["sh", "-c", "printf 1; printf 2 >&2; printf 3"], CAPTURE_MERGED, (0, b"123", None)),
    (["sh", "-c", "kill -TERM $$"], CAPTURE, (-signal.SIGTERM, b"", b"")),
    (["true"], PASSTHROUGH, (0, None, None)),
]


@pytest.fixture
def runners():
    with spawnpool.Pool(slots=1) as pool:
        yield {"pool": pool, "popen": PopenRunner()}


@pytest.mark.parametrize("argv, output, expected", CASES)
def test_runners_agree_on_results(runners, argv, output, expected):
    for name, runner in runners.items():
        r = runner.run(Command(argv, ENV, output=output))
        assert isinstance(r, Result), name
        assert (r.returncode, r.stdout, r.stderr) == expected, name
        assert r.started and r.failure is None, name
        assert r.submitted_ns <= r.started_ns <= r.exited_ns <= r.completed_ns, name
        assert r.max_rss_kb > 0, name


def test_runners_agree_on_failures(runners, tmp_path):
    cases = [
        (Command(["spawnpool-no-such-program"], ENV), "exec", errno.ENOENT),
        (Command(["true"], ENV, str(tmp_path / "gone")), "chdir", errno.ENOENT),
        (Command(["true", "x" * (128 * 1024)], ENV), "request", errno.E2BIG),
    ]
    for name, runner in runners.items():
        for command, stage, number in cases:
            r = runner.run(command)
            assert (r.started, r.failure, r.error_number, r.returncode) == (
                False, stage, number, -1), (name, stage)
            assert r.error_message and r.failure_text().endswith("(stage %s)" % stage)
            e = spawnpool.spawn_error(command, r)
            assert isinstance(e, OSError) and e.errno == number and e.stage == stage


def test_runners_start_nothing_after_an_interrupt(runners, tmp_path):
    """Session.interrupt reaches the runner (the pool, or PopenRunner where the pool
    could not start): later commands come back as killed by the first signal."""
    for name, runner in runners.items():
        marker = tmp_path / name
        assert runner.run(Command(["true"], ENV)).returncode == 0, name
        runner.interrupt(signal.SIGTERM)
        runner.interrupt(signal.SIGINT)
        r = runner.run(Command(["touch", str(marker)], ENV))
        assert (r.returncode, r.failure, r.started_ns) == (-signal.SIGTERM, None, 0), name
        assert not marker.exists(), name


def test_command_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = Command(["x"])
    assert (c.env, c.cwd, c.output) == (None, os.getcwd(), PASSTHROUGH)
    assert c.environment is os.environ
    assert Command(["x"], cwd="sub").cwd == os.path.join(os.getcwd(), "sub")
    assert Command(["x"], cwd=pathlib.Path("/abs")).cwd == "/abs"
    assert Command(["x"], cwd=b"rel").cwd == os.path.join(os.getcwdb(), b"rel")
    assert Command(["x"], {"A": "1"}).environment == {"A": "1"}


def test_result_defaults_and_text():
    r = Result(returncode=0)
    assert r.started and r.failure_text() == "" and r.slot == -1 and r.peak_memory_bytes == 0
    assert repr(r) == "<spawnpool.Result returncode=0>"
    died = Result(failure="spawner_died", error_number=errno.ECHILD, error_message="it died")
    assert not died.started and died.failure_text() == "it died"
    assert isinstance(spawnpool.spawn_error(Command(["x"]), died), spawnpool.SpawnerDied)


def test_pool_rejects_a_bad_output_mode():
    with spawnpool.Pool(slots=1) as pool:
        with pytest.raises(ValueError):
            pool.run(Command(["true"], output="fancy"))


def test_fake_runner_records_and_copies():
    answer = Result(returncode=4, stdout=b"x")
    fake = FakeRunner(answer)
    first = fake.run(Command(["a"], cwd="/"))
    first.returncode = 0                # a layer adjusting its copy
    assert fake.run(Command(["b"], cwd="/")).returncode == 4
    assert fake.argvs == [["a"], ["b"]] and fake.most == {None: 1}


# --- layers --------------------------------------------------------------------------------

def test_direct_exec_gives_sh_status_and_message(tmp_path):
    killed = Result(returncode=-signal.SIGSEGV, stdout=b"", stderr=b"")
    fake = FakeRunner(killed)
    r = DirectExec(fake).run(Command(["sh", "-c", "prog a"], ENV, "/", CAPTURE))
    assert fake.argvs == [["prog", "a"]]
    assert (r.returncode, r.stderr) == (128 + signal.SIGSEGV, b"Segmentation fault\n")
    merged = DirectExec(FakeRunner(killed)).run(Command(["sh", "-c", "p"], ENV, "/",
                                                        CAPTURE_MERGED))
    assert merged.stdout == b"Segmentation fault\n"


def test_direct_exec_falls_back_to_sh_only_for_exec_failures():
    not_found = Result(failure="exec", error_number=errno.ENOENT)
    answers = iter([not_found, Result(returncode=127)])
    fake = FakeRunner(lambda command: next(answers))
    assert DirectExec(fake).run(Command(["sh", "-c", "nope"], ENV, "/")).returncode == 127
    assert fake.argvs == [["nope"], ["sh", "-c", "nope"]]
    died = FakeRunner(Result(failure="spawner_died"))
    assert DirectExec(died).run(Command(["sh", "-c", "cc"], ENV, "/")).failure == "spawner_died"
    assert died.argvs == [["cc"]]           # never run twice


def test_sync_output_captures_passthrough_only(capfd):
    """The engine's sync layer, asked for by the session: a passthrough command runs
    captured (apart: pytest's fds 1 and 2 are two files) and prints through the package's
    console; a command the caller captures keeps its bytes."""
    fake = FakeRunner(Result(returncode=0, stdout=b"o", stderr=b"e"))
    session = Session(options.Settings(output="sync", direct_exec="no"), 1, print)
    runner = session.start(fake)
    synced = runner.run(Command(["x"], cwd="/"))
    assert capfd.readouterr() == ("o", "e")
    mine = runner.run(Command(["x"], cwd="/", output=CAPTURE))     # the caller captures
    assert capfd.readouterr() == ("", "")
    assert [c.output for c in fake.commands] == [CAPTURE, CAPTURE]
    assert (mine.stdout, mine.stderr) == (b"o", b"e")
    assert synced.returncode == 0 and session._stack.output_sync


def test_sync_blocks_go_through_the_status_lines_printer(capfd):
    """While a status line prints, the sync layer's block goes through its printer (the
    package's console, output_sync.py), not past it onto the fds."""
    from spawnpool import output_sync

    printer = RecordingPrinter()
    fake = FakeRunner(Result(returncode=1, stdout=b"o\n", stderr=b"e\n"))
    runner = Session(options.Settings(output="sync"), 1, print).start(fake)
    output_sync.set_console_printer(printer)
    try:
        result = runner.run(Command(["sh", "-c", "cc -c a.c"], ENV, "/"))
    finally:
        output_sync.set_console_printer(None)
    assert printer.writes == [(1, b"o\n"), (2, b"e\n")]
    assert capfd.readouterr() == ("", "")
    # The caller let it print: the Result carries no copy of the bytes.
    assert (result.returncode, result.stdout, result.stderr) == (1, None, None)


def test_a_blocks_views_are_released_after_the_call():
    """The engine lends the console writer views of its buffers for the call's length: a
    view kept past it reads nothing (ValueError), never the freed buffer."""
    from spawnpool import output_sync
    from spawnpool.pool import _spawnpool
    kept = []
    _spawnpool._bind(Result, Command, None, lambda out, err: kept.append((bytes(out), out)))
    try:
        fake = FakeRunner(Result(returncode=0, stdout=b"o", stderr=b""))
        Session(options.Settings(output="sync"), 1, print).start(fake).run(
            Command(["x"], ENV, "/"))
    finally:
        _spawnpool._bind(Result, Command, None, output_sync.output_block)
    [(copied, view)] = kept
    assert copied == b"o"
    with pytest.raises(ValueError):
        bytes(view)


def test_without_the_compiled_module_sync_is_warned_about_and_left_out(monkeypatch):
    """The fallback (stack._engine() None: the module does not load) is Popen without the
    engine's layers: output sync, which is one of them, says so and is not there."""
    from spawnpool import stack
    monkeypatch.setattr(stack, "_engine", lambda: None)
    warnings = []
    session = Session(options.Settings(output="sync"), 1, warnings.append)
    fake = FakeRunner()
    assert session.start(fake) is fake and not session.sync
    assert warnings == ["--output=sync: needs spawnpool's compiled module; "
                        "output is passed through"]


def test_the_engine_records_a_python_runners_results(tmp_path):
    """A Python base (FakeRunner, as PopenRunner) runs under the engine's stack, so its
    results reach the engine's trace and statistics, even with direct exec off; the
    trace's command_args are called on the command's thread."""
    settings = options.Settings(stats=True, trace="t.json", direct_exec=False,
                                base_dir=str(tmp_path))
    threads = []

    def command_args():
        threads.append(threading.get_ident())
        return {"targets": ["a.o"]}
    session = Session(settings, 1, pytest.fail, command_args=command_args)
    runner = session.start(FakeRunner(Result(failure="exec", error_message="No such file")))
    runner.run(Command(["sh", "-c", "cc -c a.c"], cwd="/"))
    session.rebase(FakeRunner(Result(returncode=0, slot=0, started_ns=1, exited_ns=2,
                                     completed_ns=3)))
    worker = threading.Thread(target=runner.run, args=(Command(["ls", "-l"], cwd="/"),))
    worker.start()
    worker.join()
    session.finish()
    assert (session.stats.commands, session.stats.unstarted) == (2, 1)
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    unstarted = [e for e in events if e["ph"] == "i"]
    ran = [e for e in events if e["ph"] == "X"]
    assert [e["args"]["command"] for e in unstarted] == ["cc -c a.c"]
    assert [e["args"]["command"] for e in ran] == ["ls -l"]
    assert ran[0]["args"]["targets"] == ["a.o"]
    assert threads == [worker.ident]                # only for the command that ran


# --- the options spec and the session -------------------------------------------------------

def test_one_spec_for_both_front_ends():
    parser = argparse.ArgumentParser()
    options.add_to_argparse(parser)
    args = parser.parse_args(["--output=sync", "--stats", "--direct-exec=no", "--local=3",
                              "--compilers=icc,nvcc"])
    cli = options.Settings.from_values(args)
    added = {}
    options.add_to_scons(lambda flag, **kw: added.setdefault(flag, kw), None)
    values = argparse.Namespace(**{kw["dest"]: kw["default"] for kw in added.values()})
    values.process_spawner_output, values.process_spawner_stats = "sync", True
    values.process_spawner_direct_exec, values.process_spawner_local = "no", 3
    values.process_spawner_compilers = "icc,nvcc"
    scons = options.Settings.from_values(values, "process_spawner_", "--process-spawner-")
    for settings in (cli, scons):
        assert (settings.output, settings.stats, settings.direct_exec, settings.local,
                settings.compilers, settings.jobserver) == ("sync", True, False, 3,
                                                            ["icc", "nvcc"], True)
    assert sorted(added) == sorted("--process-spawner-" + o.name for o in options.OPTIONS)
    assert scons.flag("trace") == "--process-spawner-trace" and cli.flag("trace") == "--trace"
    with pytest.raises(TypeError):
        options.Settings(no_such_option=1)


def layer_names(runner):
    names = []
    while hasattr(runner, "inner"):
        names.append(type(runner).__name__)
        runner = runner.inner
    return names + [type(runner).__name__]


def test_local_slots_default_to_the_usable_cpus_with_a_launcher(tmp_path):
    """The engine decides the default (spawnpool::default_local_slots): with a launcher,
    the CPUs this process may run on; without one, no bound."""
    from spawnpool import _spawnpool
    cpus = len(os.sched_getaffinity(0))
    assert _spawnpool.default_local_slots("distcc") == cpus
    assert _spawnpool.default_local_slots("") == 0
    assert _spawnpool.default_local_slots(" \t") == 0
    with_launcher = Session(options.Settings(launcher="env", base_dir=str(tmp_path)), 2,
                            [].append)
    assert with_launcher.pool_options()["local_slots"] == cpus
    without = Session(options.Settings(base_dir=str(tmp_path)), 2, [].append)
    assert without.pool_options()["local_slots"] == 0


def test_session_stacks_the_layers_in_order(tmp_path):
    fake = FakeRunner()
    warnings = []
    settings = options.Settings(output="sync", stats=True, trace="t.json", local=2,
                                launcher="env", base_dir=str(tmp_path))
    session = Session(settings, 2, warnings.append)
    runner = session.start(fake)
    # Every layer is the engine's: the runner is its stack.
    assert layer_names(runner) == ["Session"]
    assert session.pool_options()["local_slots"] == 2        # the pool's, not a layer's
    assert layer_names(session.checks_runner) == ["_BelowLauncher", "Session"]
    assert session._stack.output_sync and session._stack.direct_exec
    runner.run(Command(["sh", "-c", "gcc -o a.o -c a.c"], ENV, "/"))
    session.checks_runner.run(Command(["sh", "-c", "gcc -c conftest.c"], ENV, "/"))
    launched, check = fake.commands
    assert launched.argv[1:] == ["gcc", "-o", "a.o", "-c", "a.c"] and not launched.local
    assert os.path.basename(launched.argv[0]) == "env"       # direct exec: no sh
    assert check.argv == ["gcc", "-c", "conftest.c"] and check.local
    fake.commands.clear()
    other = FakeRunner()
    session.rebase(other)                                    # a resized pool
    runner.run(Command(["sh", "-c", "true"], ENV, "/"))
    assert len(other.commands) == 1 and not fake.commands
    session.finish()
    assert (tmp_path / "t.json").exists() and warnings == []
    assert "statistics" in session.report("x") and "3 run" in session.report("x")
    assert "x: spawnpool: env: 1 compiles through env" in session.report("s", "x: ")
    plain = Session(options.Settings(direct_exec="no"), 1, warnings.append)
    assert plain.start(fake) is fake and not plain.any_layer


def test_session_runs_the_engines_layers_on_a_python_runner_and_a_pool():
    """The engine's stack on PopenRunner (called back with the GIL: the fallback when the
    pool cannot start) and on a real pool give the same results; a closed pool's is data."""
    session = Session(options.Settings(), 1, print)
    line = Command(["sh", "-c", "printf x; exit 3"], ENV, "/", CAPTURE)   # needs sh
    simple = Command(["sh", "-c", "printf y"], ENV, "/", CAPTURE)        # direct exec
    results = []
    runner = session.start(PopenRunner())
    results.append((runner.run(line), runner.run(simple)))
    with spawnpool.Pool(slots=1) as pool:
        session.rebase(pool)
        results.append((runner.run(line), runner.run(simple)))
    for ran_line, ran_simple in results:
        assert (ran_line.returncode, ran_line.stdout) == (3, b"x")
        assert (ran_simple.returncode, ran_simple.stdout, ran_simple.stderr) == (0, b"y", b"")
    closed = runner.run(simple)
    assert (closed.failure, closed.returncode) == ("pool_closed", -1)


def test_session_interrupt_cancels_all_but_sigint():
    cancelled, interrupted = [], []
    base = FakeRunner()
    base.cancel = cancelled.append
    session = Session(options.Settings(local=1), 1, print)
    runner = session.start(base)
    base_interrupt, base.interrupt = base.interrupt, lambda sig: (
        interrupted.append(sig), base_interrupt(sig))
    session.interrupt(signal.SIGINT)        # a terminal's: the spawners pass it on
    session.interrupt(signal.SIGTERM)       # to the driver alone: passed on here
    assert cancelled == [signal.SIGTERM]
    assert interrupted == [signal.SIGINT, signal.SIGTERM]     # the pool's to act on
    # The first signal stays (as Pool.interrupt): nothing starts.
    assert runner.run(Command(["sh", "-c", "x"], cwd="/")).returncode == -signal.SIGINT
    assert base.commands == []


def test_session_warns_and_goes_on(tmp_path):
    warnings = []
    settings = options.Settings(trace=str(tmp_path / "no" / "dir" / "t.json"), local=0,
                                launcher="no-such-launcher-for-the-test")
    session = Session(settings, 1, warnings.append)
    assert session.trace is None and session.launcher is not None
    assert [w.split(":")[0].split("=")[0] for w in warnings] == ["--trace", "--launcher",
                                                                  "--local"]


# --- the Popen-style wrapper -----------------------------------------------------------------

def test_popen_style_call_writes_where_popen_would(tmp_path):
    fake = FakeRunner(Result(returncode=1, stdout=b"out\n", stderr=b"err\n"))
    out, err = io.StringIO(), io.StringIO()
    assert popen_style.call(fake, ["sh", "-c", "x"], ENV, out, err).returncode == 1
    assert (out.getvalue(), err.getvalue()) == ("out\n", "err\n")
    with open(tmp_path / "log", "w") as log:
        log.write("first\n")
        popen_style.call(FakeRunner(Result(returncode=0, stdout=b"both\n")), ["x"], None,
                         log, log)
    assert (tmp_path / "log").read_text() == "first\nboth\n"
    assert [c.output for c in fake.commands] == [CAPTURE]


def test_popen_style_call_raises_where_popen_would():
    for failure, number, raises in (("exec", errno.ENOENT, True), ("request", errno.E2BIG, True),
                                    ("request", errno.EINVAL, False),
                                    ("spawner_died", errno.ECHILD, False)):
        fake = FakeRunner(Result(failure=failure, error_number=number, error_message="m"))
        if raises:
            with pytest.raises(OSError) as info:
                popen_style.call(fake, ["sh", "-c", "x"])
            assert (info.value.errno, info.value.filename) == (number, "sh")
            assert info.value.strerror == os.strerror(number)
        else:
            assert popen_style.call(fake, ["sh", "-c", "x"]).failure == failure


def test_memory_options_become_pool_arguments(tmp_path):
    off = options.Settings(history="h.db")
    assert off.pool_options() == {} and off.history_path() is None
    cli = options.Settings(base_dir=str(tmp_path), memory="auto")
    assert cli.pool_options() == {"memory_budget": "auto",
                                  "warning_prefix": "spawnpool: warning: --memory: "}
    scons = options.Settings("--process-spawner-", str(tmp_path), ".spawnpool" + os.sep,
                             memory="6G")
    assert scons.pool_options("scons: warning: ") == {
        "memory_budget": "6G", "history": str(tmp_path / ".spawnpool" / options.HISTORY_FILE),
        "warning_prefix": "scons: warning: --process-spawner-memory: "}
    (tmp_path / "state").mkdir()
    moved = options.Settings(base_dir=str(tmp_path), memory="auto", history="state")
    assert moved.history_path() == str(tmp_path / "state" / options.HISTORY_FILE)
    named = options.Settings(base_dir=str(tmp_path), memory="auto", history="/x/h.db")
    assert named.history_path() == "/x/h.db"


def test_the_same_cpu_handoff_option_reaches_the_pool_only_when_on():
    """Off by default (docs/architecture.md, "The CPU hint": builds measured faster)."""
    assert options.Settings().pool_options() == {}
    assert options.Settings(same_cpu_handoff="no").pool_options() == {}
    assert options.Settings(same_cpu_handoff="yes").pool_options() == {"same_cpu_handoff": True}
    both = options.Settings(memory="auto", same_cpu_handoff="yes").pool_options()
    assert both["same_cpu_handoff"] is True and both["memory_budget"] == "auto"
    with spawnpool.Pool(slots=1, **options.Settings(same_cpu_handoff="yes").pool_options()) as pool:
        assert pool.run(["true"]).returncode == 0


def test_session_warns_of_a_history_without_memory():
    warnings = []
    Session(options.Settings(history="h.db"), 1, warnings.append)
    assert warnings == ["--history: only used with --memory or --status; ignored"]


def test_the_session_opens_the_history_the_engine_decides(tmp_path, capfd):
    """spawnpool::history_path decides (session.h): kept with the status line or memory
    admission, at the default (.spawnpool/ at the top) or the named path; none when
    neither reads it or it is off; a tree where it cannot be made is one warning."""
    def session(**values):
        warnings = []
        settings = options.Settings('--process-spawner-', str(tmp_path), '.spawnpool' + os.sep,
                                    **values)
        made = Session(settings, 1, warnings.append, prefix='scons')
        made.finish()
        return made, warnings

    default = tmp_path / '.spawnpool' / options.HISTORY_FILE
    for values in ({'status': 'plain'}, {'memory': 'auto'},
                   {'status': 'plain', 'memory': 'auto'}):
        made, warnings = session(**values)
        assert made.history is not None and warnings == [], values
        assert default.is_file(), values
        shutil.rmtree(tmp_path / '.spawnpool')
    for values in ({}, {'status': 'off'}, {'status': 'plain', 'history': 'off'},
                   {'memory': 'auto', 'history': 'OFF'}):
        made, warnings = session(**values)
        assert made.history is None and warnings == [], values
        assert not (tmp_path / '.spawnpool').exists(), values
    made, warnings = session(status='plain', history='state.db')
    assert made.history is not None and (tmp_path / 'state.db').is_file()
    made, warnings = session(status='off', history='other.db')
    assert made.history is None and not (tmp_path / 'other.db').exists()
    assert warnings == ['--process-spawner-history: only used with --process-spawner-memory '
                        'or --process-spawner-status; ignored']
    capfd.readouterr()
    (tmp_path / '.spawnpool').write_text('not a directory\n')    # as a read-only tree
    made, warnings = session(status='plain')
    err = capfd.readouterr().err
    assert warnings == [] and err.count('warning') == 1, err
    assert err.startswith('scons: warning: --process-spawner-history: '), err


def test_pool_memory_budget_values(tmp_path):
    with spawnpool.Pool(slots=1) as pool:
        r = pool.run(spawnpool.Command(["/bin/true"]))
        assert (r.memory_source, r.predicted_peak_bytes) == ("rusage", 0)
        assert r.peak_memory_bytes == r.max_rss_kb * 1024
    for bad in ("lots", 0, -5, 1.5, True):
        with pytest.raises((ValueError, TypeError)):
            spawnpool.Pool(slots=1, memory_budget=bad)
    history = tmp_path / "h.sqlite"
    with spawnpool.Pool(slots=1, memory_budget=1 << 30, history=str(history)) as pool:
        r = pool.run(spawnpool.Command(["/bin/true"]))
        assert r.returncode == 0 and r.predicted_peak_bytes > 0
        assert r.memory_source in ("cgroup", "cgroup_sampled", "rusage")  # sampled: v2 < 5.19
    assert history.is_file()


@pytest.mark.parametrize('values, jobserver, waits', [
    ({}, None, False),                           # slots only: nothing to wait for
    ({'memory': 'auto'}, None, True),            # memory admission holds commands back
    ({'memory': 'off'}, None, False),
    ({'launcher': 'distcc'}, None, True),        # local slots
    ({'local': 2}, None, True),
    ({}, object(), True),                        # make's tokens
    ({'jobserver': 'no'}, object(), False),      # make's, but not shared
])
def test_commands_may_wait_is_every_kind_of_admission_wait(values, jobserver, waits):
    """The front ends start their signal watch when this is true (a stop signal must not
    let a waiting command start before the handler has run): memory waits count too."""
    assert options.Settings(**values).commands_may_wait(jobserver) is waits
