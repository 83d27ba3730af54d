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
