"""genscons.py makes the tree it promises, and SCons and make build it alike.

Run with: /usr/bin/python3 -m pytest bench_projects/tests
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH_PROJECTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH_PROJECTS))
import verify_outputs  # noqa: E402  (found through the path set just above)

GENERATOR = BENCH_PROJECTS / "genscons.py"


def generate(out, *options):
    """Generate a small tree into `out`; returns the counts it printed."""
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--preset", "small", "--json", "--out", str(out),
         *options],
        stdout=subprocess.PIPE, check=True)
    return json.loads(result.stdout)["counts"]


def tree_contents(root):
    """Every file's bytes, keyed by path, plus the empty directories."""
    contents = {}
    for directory, subdirs, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        if not subdirs and not files:
            contents[relative + "/"] = b""
        for name in files:
            contents[os.path.join(relative, name)] = Path(directory, name).read_bytes()
    return contents


@pytest.fixture
def small_tree(tmp_path):
    tree = tmp_path / "tree"
    return tree, generate(tree)


def test_same_arguments_give_identical_trees(small_tree, tmp_path):
    tree, _ = small_tree
    generate(tmp_path / "again")
    generate(tmp_path / "other_seed", "--seed", "2")
    assert tree_contents(tmp_path / "again") == tree_contents(tree)
    assert tree_contents(tmp_path / "other_seed") != tree_contents(tree)


def test_printed_counts_match_the_tree(small_tree):
    tree, counts = small_tree
    paths = [p.relative_to(tree) for p in tree.rglob("*")]
    names = [p.name for p in paths]
    source_dirs = {p.parent for p in paths if p.suffix == ".c"}
    assert len(source_dirs) == counts["directories"]
    assert sum(1 for p in paths if p.name.startswith("lup")) == counts["lookup_dirs"]
    assert all(not any((tree / p).iterdir()) for p in paths if p.name.startswith("lup"))
    assert sum(1 for p in paths if p.suffix == ".c") == counts["sources"]
    assert sum(1 for p in paths if p.suffix == ".h") == counts["headers"]
    assert names.count("SConstruct") + names.count("SConscript") == counts["sconscripts"]
    assert names.count("module.mk") + names.count("Makefile") == counts["makefiles"]


def build(command, cwd):
    result = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120, check=False)
    output = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 0, output
    assert "warning:" not in output, output
    return output


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("scons", "make", "cc")),
                    reason="needs scons, make and cc on PATH")
def test_scons_and_make_builds_agree(small_tree, tmp_path):
    tree, counts = small_tree
    scons_log = build(["scons", "-j2", "-Q"], cwd=tree)
    make_out = tmp_path / "make-out"
    build(["make", "-j2", f"O={make_out}"], cwd=tree)

    # -Q leaves exactly one line per command SCons ran.
    assert len(scons_log.splitlines()) == counts["scons_commands"]
    assert verify_outputs.verify_builds(str(tree), [str(tree), str(make_out)]) == []


def test_mixed_tree_weighs_some_libraries_and_builds_alike(tmp_path):
    """--mixed: the same tree and counts, with padding functions in the sources of the
    heavy libraries only (several weights), and the programs print what they did."""
    uniform, mixed = tmp_path / "uniform", tmp_path / "mixed"
    counts = generate(uniform, "--files", "40")
    assert generate(mixed, "--files", "40", "--mixed") == counts
    plain, weighed = tree_contents(uniform), tree_contents(mixed)
    assert sorted(plain) == sorted(weighed)
    padded = [p for p in plain if p.endswith(".c") and plain[p] != weighed[p]]
    assert padded and len(padded) < sum(1 for p in plain if p.endswith(".c"))
    assert all(weighed[p].startswith(plain[p]) and b"_pad0(" in weighed[p] for p in padded)
    pads = {weighed[p].count(b"_pad") for p in padded}
    assert len(pads) >= 2, pads    # more than one weight
    if not all(shutil.which(tool) for tool in ("scons", "cc")):
        pytest.skip("needs scons and cc on PATH to build the mixed tree")
    log = build(["scons", "-j2", "-Q"], cwd=mixed)
    assert len(log.splitlines()) == counts["scons_commands"]
    assert verify_outputs.verify_builds(str(mixed), [str(mixed)]) == []
