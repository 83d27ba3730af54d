"""The generated sections of docs/benchmarks.md: each report replaces its own section and
a full report.py run keeps the sections it has no results for."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import marked_section  # noqa: E402  (found through the path set just above)
import memory_report  # noqa: E402
import report  # noqa: E402

BEGIN, END = "<!-- s -->", "<!-- /s -->"


def test_replace_appends_then_replaces_in_place():
    text = marked_section.replace("# Report\n\nintro\n", BEGIN, END, f"{BEGIN}\nold\n{END}\n")
    assert text == f"# Report\n\nintro\n\n{BEGIN}\nold\n{END}\n"
    text = marked_section.replace(text + "\n## After\n", BEGIN, END, f"{BEGIN}\nnew\n{END}\n")
    assert text == f"# Report\n\nintro\n\n{BEGIN}\nnew\n{END}\n\n## After\n"
    assert marked_section.find(text, BEGIN, END) == f"{BEGIN}\nnew\n{END}\n"
    assert marked_section.find("no section", BEGIN, END) is None


def test_full_report_keeps_the_memory_section(tmp_path):
    memory = f"{memory_report.BEGIN}\n## Memory benchmark\n\nmeasured\n{memory_report.END}\n"
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n\n## Spawn benchmark\n\nold\n\n" + memory)
    text = report.keep_other_sections(str(markdown), "# Benchmarks\n\n## Spawn benchmark\n\nnew\n",
                                      keep_pythons=True)
    assert "new" in text and "old" not in text
    assert text.endswith(memory)


def test_full_report_keeps_the_memory_rows_by_environment(tmp_path):
    memory = f"{memory_report.BEGIN}\n## Memory benchmark\n\nmeasured\n{memory_report.END}\n"
    rows = f"{memory_report.ENV_BEGIN}\n### By environment\n\n| v2 |\n{memory_report.ENV_END}\n"
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n\nold\n\n" + memory + "\n" + rows)
    text = report.keep_other_sections(str(markdown), "# Benchmarks\n\nnew\n", keep_pythons=True)
    assert text.endswith(memory + "\n" + rows)


def test_full_report_keeps_the_eta_section_and_eta_bench_rewrites_only_its_own(tmp_path):
    import json
    import eta_bench
    markdown = tmp_path / "benchmarks.md"
    eta = f"{eta_bench.BEGIN}\n## ETA benchmark (issue 18)\n\nmeasured\n{eta_bench.END}\n"
    markdown.write_text("# Benchmarks\n\n## Spawn benchmark\n\nold\n\n" + eta)
    text = report.keep_other_sections(str(markdown), "# Benchmarks\n\n## Spawn benchmark\n\nnew\n",
                                      keep_pythons=True)
    assert "new" in text and "old" not in text and text.endswith(eta)
    # eta_bench.py --report ETA_JSON --markdown FILE: its section again, the rest as it was.
    markdown.write_text(text)
    result = {"started": 0, "machine": {"loadavg_at_start": ["1"], "loadavg_at_end": ["2"]},
              "cpus": 2, "jobs": 2, "builds": 1, "shape": {"levels": 2, "dirs": 3, "files": 50},
              "tree": {"sources": 200, "libraries": 10, "programs": 4}, "scons_version": "4.4.0",
              "cost": [{"order": ["line", "off"], "line": {"wall_s": 10.0, "driver_cpu_s": 2.0},
                        "off": {"wall_s": 10.0, "driver_cpu_s": 2.0}}]}
    (tmp_path / "eta.json").write_text(json.dumps(result))
    assert eta_bench.main_args(["--report", str(tmp_path / "eta.json"), "--markdown", str(markdown)]) == 0
    again = markdown.read_text()
    assert again.startswith("# Benchmarks\n\n## Spawn benchmark\n\nnew\n")
    assert again.count(eta_bench.BEGIN) == 1 and "measured" not in again
    assert "| 1 | line | 10.00 s | 10.00 s | 1.000 |" in again
    # A mixed tree's run (--mixed) goes into a section of its own; the uniform one stays,
    # and the full report keeps both.
    result["shape"]["mixed"] = True
    (tmp_path / "eta.json").write_text(json.dumps(result))
    assert eta_bench.main_args(["--report", str(tmp_path / "eta.json"), "--markdown", str(markdown)]) == 0
    both = markdown.read_text()
    assert both.startswith(again) and both.count(eta_bench.MIXED_BEGIN) == 1
    assert "## ETA benchmark (issue 18): a mixed tree" in both and "--files 50 --mixed`" in both
    markdown.write_text(report.keep_other_sections(str(markdown), "# Benchmarks\n", keep_pythons=True))
    kept = markdown.read_text()
    assert kept.count(eta_bench.BEGIN) == 1 and kept.count(eta_bench.MIXED_BEGIN) == 1


def test_compare_spawn_replaces_its_table_of_the_same_title(tmp_path):
    import json
    import compare_spawn
    runs = {}
    for name, pool_us in (("before", 110.0), ("after", 100.0)):
        records = [{"method": m, "kind": "single", "rss_gib": 0.0, "nofile": 1024,
                    "threads": 1, "round": 0, "rep": 0, "count": 100, "elapsed_s": 1.0,
                    "driver_cpu_s": 0.005, "ratio_median": us / 100.0}
                   for m, us in (("floor", 100.0), ("pool", pool_us))]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"machine": {"loadavg_at_start": ["1"], "loadavg_at_end": ["2"]},
                                    "params": {"rounds": 1, "reps": 1, "rss_gib": [0.0],
                                               "threads": [1]}, "records": records}))
        runs[name] = [str(path)]
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n")
    for title in ("A", "B", "A"):
        compare_spawn.update(str(markdown), title, runs["before"], runs["after"])
    text = markdown.read_text()
    assert text.count("### A\n") == 1 and text.count("### B\n") == 1
    assert "| single, RSS 0 GiB, NOFILE 1024, 1 thread | 1.10x | 1.00x | 50 µs | 50 µs | 1.00x |" in text


def test_eta_cost_splits_the_driver_cpu_into_user_and_system_when_the_run_kept_both():
    import eta_bench
    result = {"started": 0, "machine": {}, "cpus": 2, "jobs": 2, "builds": 1,
              "shape": {"levels": 2, "dirs": 3, "files": 50},
              "tree": {"sources": 200, "libraries": 10, "programs": 4}}
    pair = {"order": ["line", "off"],
            "line": {"wall_s": 10.0, "driver_cpu_s": 3.0, "driver_user_s": 2.2, "driver_sys_s": 0.8},
            "off": {"wall_s": 10.0, "driver_cpu_s": 3.0, "driver_user_s": 2.0, "driver_sys_s": 1.0}}
    assert "): user 1.100, system 0.800 (medians)." in eta_bench.render(dict(result, cost=[pair]))
    old = {m: {"wall_s": 10.0, "driver_cpu_s": 3.0} for m in ("line", "off")}
    assert "(range 1.000-1.000)." in eta_bench.render(dict(result, cost=[dict(old, order=["line", "off"])]))
