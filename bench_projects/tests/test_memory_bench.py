"""The memory benchmark's pieces: the tree generator, mem_compile, the cgroup cap, the report.

Run with: /usr/bin/python3 -m pytest bench_projects/tests
Every allocation here is a few MiB; the one that is meant to be OOM-killed runs inside
a 32 MiB cap.
"""

import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

BENCH_PROJECTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH_PROJECTS))
import memory_cgroup  # noqa: E402  (found through the path set just above)
import memory_report  # noqa: E402
import memory_tree  # noqa: E402

MEM_COMPILE_SOURCE = BENCH_PROJECTS / "memory_bench" / "mem_compile.c"
# A tree small enough to build in a second or two with a few MiB per command.
TINY = replace(memory_tree.Params(), dirs=3, files=4, heavy_dir=1, p50_mib=2, p99_mib=8,
               min_mib=1, max_mib=12, time_scale=0.05, archive_mib=1, link_mib=4)


@pytest.fixture(scope="module")
def mem_compile(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc)")
    out = tmp_path_factory.mktemp("bin") / "mem_compile"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(MEM_COMPILE_SOURCE)], check=True)
    return str(out)


def tree_bytes(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# ------------------------------------------------------------------ generator

def test_same_parameters_give_identical_trees(tmp_path):
    memory_tree.write_tree(memory_tree.Params(), str(tmp_path / "a"))
    memory_tree.write_tree(memory_tree.Params(), str(tmp_path / "b"))
    memory_tree.write_tree(replace(memory_tree.Params(), seed=7), str(tmp_path / "c"))
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    assert tree_bytes(tmp_path / "a") != tree_bytes(tmp_path / "c")


def test_distribution_has_the_promised_percentiles():
    params = memory_tree.Params()
    cmds = memory_tree.commands(params)
    sizes = [c["mib"] for c in cmds if c["kind"] == "compile"]
    stats = memory_tree.describe_sizes(sizes)
    assert stats["count"] == params.dirs * params.files
    assert 90 <= stats["p50"] <= 110
    assert 1400 <= stats["p99"] <= 1650
    assert stats["max"] == params.max_mib and stats["min"] >= params.min_mib
    # The seed moves sizes around, never changes them.
    other = [c["mib"] for c in memory_tree.commands(replace(params, seed=9))
             if c["kind"] == "compile"]
    assert sorted(other) == sorted(sizes) and other != sizes


def test_heavy_compiles_cluster_in_one_directory():
    params = memory_tree.Params()
    placed = memory_tree.place_sizes(params)
    everything = sorted(v for sizes in placed.values() for v in sizes)
    heavy_floor = everything[len(everything) - round(len(everything) * params.heavy_share)]
    in_cluster = sum(v >= heavy_floor for v in placed[params.heavy_dir])
    heavy_total = sum(v >= heavy_floor for v in everything)
    assert in_cluster >= 0.6 * heavy_total
    assert all(len(sizes) == params.files for sizes in placed.values())


def test_commands_come_in_build_order():
    cmds = memory_tree.commands(TINY)
    seen = set()
    for c in cmds:
        assert all(i.endswith(".c") or i in seen for i in c["inputs"])
        seen.add(c["target"])
    assert cmds[-1]["kind"] == "link"


def test_verify_finds_missing_and_wrong_outputs(tmp_path):
    tree = tmp_path / "tree"
    memory_tree.write_tree(TINY, str(tree))
    outputs = memory_tree.outputs(TINY)
    assert memory_tree.verify(TINY, str(tree)) == [(o, "missing") for o in outputs]
    for path, data in memory_tree.expected_files(TINY).items():
        (tree / path).write_bytes(data)
    assert memory_tree.verify(TINY, str(tree)) == []
    (tree / outputs[0]).write_bytes(b"truncated")
    assert memory_tree.verify(TINY, str(tree)) == [(outputs[0], "wrong")]


# ---------------------------------------------------------------- mem_compile

def run_measured(argv):
    """(exit status, max RSS in KiB, wall seconds) of one command."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    return proc.returncode, usage.ru_maxrss, time.monotonic() - start


def test_mem_compile_allocates_holds_and_writes_the_expected_output(mem_compile, tmp_path):
    inputs = [tmp_path / "a.c", tmp_path / "b.c"]
    inputs[0].write_bytes(b"int a;\n")
    inputs[1].write_bytes(b"")
    out = tmp_path / "a.o"
    status, max_rss_kib, wall = run_measured([mem_compile, "24", "200", str(out),
                                              *map(str, inputs)])
    assert status == 0
    assert max_rss_kib >= 24 * 1024
    assert wall >= 0.2
    expected = memory_tree.expected_output(str(out), 24, 200, [p.read_bytes() for p in inputs])
    assert out.read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.c", "a.o", "b.c"]  # no temp file


def test_mem_compile_rejects_bad_arguments_and_unreadable_inputs(mem_compile, tmp_path):
    out = tmp_path / "x.o"
    for argv in ([], ["12"], ["-1", "0", str(out)], ["12", "abc", str(out)]):
        assert subprocess.run([mem_compile, *argv], stderr=subprocess.DEVNULL).returncode == 2
    missing = subprocess.run([mem_compile, "1", "0", str(out), str(tmp_path / "nope.c")],
                             stderr=subprocess.PIPE, text=True)
    assert missing.returncode == 4 and "nope.c" in missing.stderr
    assert not out.exists()


# ---------------------------------------------------------------- cgroup cap

needs_cgroup = pytest.mark.skipif(memory_cgroup.unavailable_reason() is not None,
                                  reason=f"cannot cap memory here: "
                                         f"{memory_cgroup.unavailable_reason()}")


@needs_cgroup
def test_cap_oom_kills_a_command_over_the_limit_and_counts_it(mem_compile, tmp_path):
    out = tmp_path / "big.o"
    with memory_cgroup.MemoryCap(32 << 20, prefix="membench-test") as cap:
        path = cap.path
        assert open(os.path.join(path, "memory.limit_in_bytes")).read().strip() == str(32 << 20)
        killed = subprocess.run(cap.command([mem_compile, "64", "0", str(out)]))
        assert killed.returncode in (-9, 137)
        assert cap.oom_kills() >= 1
        fits = subprocess.run(cap.command([mem_compile, "4", "0", str(tmp_path / "small.o")]))
        assert fits.returncode == 0
    assert not out.exists()
    assert not os.path.exists(path)


@needs_cgroup
def test_cap_kills_what_is_left_and_removes_child_cgroups():
    with memory_cgroup.MemoryCap(64 << 20, prefix="membench-test") as cap:
        path = cap.path
        sleeper = subprocess.Popen(cap.command(["sleep", "600"]))
        child = os.path.join(path, "slot0")  # as a pool's per-slot cgroup would be
        os.mkdir(child)
        nested = subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec sleep 600',
                                   os.path.join(child, "cgroup.procs")])
        deadline = time.monotonic() + 10
        while len(cap.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert set(cap.pids()) == {sleeper.pid, nested.pid}
    assert sleeper.wait(timeout=10) == -9 and nested.wait(timeout=10) == -9
    assert not os.path.exists(path)


@needs_cgroup
def test_cap_is_removed_when_the_body_raises():
    with pytest.raises(RuntimeError):
        with memory_cgroup.MemoryCap(64 << 20, prefix="membench-test") as cap:
            path = cap.path
            raise RuntimeError("build crashed")
    assert not os.path.exists(path)


# ------------------------------------------------------- a build and the report

@pytest.mark.skipif(shutil.which("scons") is None, reason="no scons on PATH")
def test_tiny_tree_builds_with_scons_and_verifies(mem_compile, tmp_path):
    tree = tmp_path / "tree"
    memory_tree.write_tree(TINY, str(tree))
    tool = tree / memory_tree.TOOL_PATH
    tool.parent.mkdir()
    shutil.copy2(mem_compile, tool)
    env = dict(os.environ, HOME=str(tmp_path), PYTHONNOUSERSITE="1")
    env.pop("SCONSFLAGS", None)
    subprocess.run(["scons", "-Q", "-j2"], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    assert memory_tree.verify(TINY, str(tree)) == []


def fake_run(variant, phase, rnd, ok, wall, oom=0, lost=0):
    return {"variant": variant, "phase": phase, "round": rnd, "ok": ok, "wall_s": wall,
            "oom_kills": oom, "lost_outputs": lost, "peak_bytes": 3 << 30}


def fake_result(reference_fails_in_round=None):
    runs = [fake_run("stock-j2", "ladder", 0, True, 45.0),
            fake_run("stock-j3", "ladder", 0, True, 30.0),
            fake_run("stock-j8", "ladder", 0, False, 5.0, oom=2, lost=170)]
    for rnd in range(10):
        ref_ok = rnd != reference_fails_in_round
        runs += [fake_run("stock-j3", "paired", rnd, ref_ok, 30.0 + rnd, lost=0 if ref_ok else 9),
                 fake_run("stock-j8", "paired", rnd, False, 5.0, oom=1, lost=170),
                 fake_run("admit-warm", "paired", rnd, True, 0.5 * (30.0 + rnd)),
                 fake_run("admit-cold", "paired", rnd, rnd != 3, 40.0 + rnd)]
    return {"machine": {"nproc": 2}, "duration_s": 600, "cap_mib": 3584, "rounds": 1,
            "admission_runs": 10, "reference": "stock-j3", "unavailable": {}, "notes": [],
            "params": memory_tree.manifest(TINY)["params"],
            "distribution": memory_tree.manifest(TINY)["distribution"], "runs": runs}


def test_report_pairs_ratios_per_round_and_judges_targets():
    result = fake_result()
    assert memory_report.paired_ratios(result, "admit-warm", "stock-j3") == [0.5] * 10
    verdicts = [v for _, _, v in memory_report.targets(result)]
    assert verdicts.count("met") == 4
    assert verdicts.count("**missed**") == 2  # cold: one failure, 1.3x
    text = memory_report.section(result)
    # Between its markers, so that memory_report.py --markdown can replace it in place.
    assert text.startswith(memory_report.BEGIN + "\n## Memory benchmark")
    assert text.endswith(memory_report.END + "\n") and "| 3 (reference) |" in text


def test_report_falls_back_to_a_lower_reference_when_the_paired_one_failed():
    result = fake_result(reference_fails_in_round=5)
    assert memory_report.never_failed_reference(result) == "stock-j2"
    ratios, paired = memory_report.ratios(result, "admit-warm")
    assert not paired and len(ratios) == 1 and ratios[0] < 0.5
    text = memory_report.section(result)
    assert "| 2 (reference) |" in text and "not paired" in text


def test_environment_rows_replace_their_own_and_keep_the_others(tmp_path):
    v1 = dict(fake_result(), environment="cgroup v1, root", command_line="memory_bench.py")
    v1["machine"] = {"kernel": "6.18", "commit": "abc1234"}
    v2 = dict(v1, environment="cgroup v2, root (guest)",
              machine={"kernel": "6.1", "commit": "abc1234"})
    text = memory_report.environments_section([v1, v2])
    assert text.startswith(memory_report.ENV_BEGIN + "\n### By environment")
    assert "| cgroup v1, root | 6.18 |" in text and "| cgroup v2, root (guest) | 6.1 |" in text
    assert "0.50 [0.50–0.50]x (paired per round) | met |" in text
    # The v2 run again, slower: its row is replaced, the v1 row kept as it was.
    slower = dict(v2, runs=[dict(r, wall_s=r["wall_s"] * 2) if r["variant"] == "admit-warm"
                            else r for r in v2["runs"]])
    again = memory_report.environments_section([slower], old=text)
    assert again.count("| cgroup v1, root |") == 1 and again.count("| cgroup v2, root") == 1
    assert "1.00 [1.00–1.00]x (paired per round) | **missed** |" in again
    assert [line for line in again.splitlines() if line.startswith("| cgroup v1")] == \
        [line for line in text.splitlines() if line.startswith("| cgroup v1")]
    # Written right after the memory section the first time, in place afterwards.
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text(memory_report.section(v1) + "\n## After\n")
    for _ in range(2):
        path = tmp_path / "v2.json"
        path.write_text(__import__("json").dumps(v2))
        assert memory_report.main(["memory_report.py", "--environments", str(path),
                                   "--markdown", str(markdown)]) == 0
    doc = markdown.read_text()
    assert doc.count(memory_report.ENV_BEGIN) == 1
    assert doc.index(memory_report.END) < doc.index(memory_report.ENV_BEGIN) < doc.index("## After")


def test_cap_command_keeps_a_wrapper_out_of_a_v2_cap():
    cap = memory_cgroup.MemoryCap(1 << 30)
    cap.path, cap.version = "/sys/fs/cgroup/membench-x", 2
    command = cap.command(["scons"], wrapper=["tree_rusage", "r.json"])
    assert command[:3] == ["tree_rusage", "r.json", "/bin/sh"] and command[-1] == "scons"
    cap.version = 1
    command = cap.command(["scons"], wrapper=["tree_rusage", "r.json"])
    assert command[0] == "/bin/sh" and command[-3:] == ["tree_rusage", "r.json", "scons"]


def test_environment_notes_stay_with_their_row():
    base = dict(fake_result(), command_line="memory_bench.py", machine={"kernel": "6.1"})
    a = dict(base, environment="A", environment_notes=["slow guest"])
    b = dict(base, environment="B")
    text = memory_report.environments_section([a, b])
    assert text.count("- Note (A): slow guest") == 1
    again = memory_report.environments_section([b], old=text)   # A's row and note kept
    assert again.count("- Note (A): slow guest") == 1 and again.count("| A |") == 1
    again = memory_report.environments_section([a], old=again)  # A's own again: once
    assert again.count("- Note (A): slow guest") == 1
