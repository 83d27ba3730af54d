#!/usr/bin/python3
"""Check that builds of a genscons tree produced the same, correct programs.

usage: verify_outputs.py TREE BUILD_ROOT [BUILD_ROOT ...]

TREE holds genscons.json (written by genscons.py). A BUILD_ROOT is where a
build put its outputs, mirroring the tree: TREE itself for the in-tree SCons
build, the O= directory for make. Object files from two command lines may
differ in bytes, so each build is judged by what it made: in every directory
the expected numbers of objects and libraries, and a program that prints
exactly what the generator computed. Builds are also compared to each other,
so a report names the build that differs. Exits 1 and lists the problems if
any.

Python 3 standard library only; runs under /usr/bin/python3.
"""

import json
import os
import subprocess
import sys

MANIFEST_NAME = "genscons.json"
PROGRAM_TIMEOUT_S = 30


def load_manifest(tree):
    with open(os.path.join(tree, MANIFEST_NAME), encoding="utf-8") as f:
        return json.load(f)


def count_files(directory, prefix, suffix):
    """Files directly in `directory` (subdirectories are other tree dirs)."""
    if not os.path.isdir(directory):
        return 0
    return sum(1 for name in os.listdir(directory)
               if name.startswith(prefix) and name.endswith(suffix))


def run_program(path):
    """The program's stdout, or a description of why there is none."""
    if not os.access(path, os.X_OK):
        return "<missing>"
    result = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            timeout=PROGRAM_TIMEOUT_S, check=False)
    output = result.stdout.decode("utf-8", "replace")
    return output if result.returncode == 0 else f"<exit {result.returncode}> {output}"


def observe_build(manifest, build_root):
    """What one build produced, per tree directory."""
    observed = {}
    for entry in manifest["directories"]:
        directory = os.path.normpath(os.path.join(build_root, entry["path"]))
        observed[entry["path"]] = {
            "objects": count_files(directory, "", ".o"),
            "libraries": count_files(directory, "lib", ".a"),
            "output": run_program(os.path.join(build_root, entry["program"])),
        }
    return observed


def verify_builds(tree, build_roots):
    """Problems found, as readable lines; empty when every build is right."""
    manifest = load_manifest(tree)
    problems = []
    observations = [(root, observe_build(manifest, root)) for root in build_roots]
    for entry in manifest["directories"]:
        for root, observed in observations:
            got = observed[entry["path"]]
            for key in ("objects", "libraries", "output"):
                if got[key] != entry[key]:
                    problems.append(f"{root}: {entry['path']}: {key} is {got[key]!r},"
                                    f" expected {entry[key]!r}")
    # Also against each other, so a report tells "the builds disagree" apart
    # from "the builds agree but not with the generator's expectation".
    first_root, first = observations[0]
    for root, observed in observations[1:]:
        for path in first:
            if first[path]["output"] != observed[path]["output"]:
                problems.append(f"{path}: {first_root} prints {first[path]['output']!r},"
                                f" {root} prints {observed[path]['output']!r}")
    return problems


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    tree, build_roots = argv[0], argv[1:]
    problems = verify_builds(tree, build_roots)
    for problem in problems:
        print(problem)
    programs = len(load_manifest(tree)["directories"])
    verdict = "FAILED" if problems else "OK"
    print(f"{verdict}: {len(build_roots)} build(s), {programs} program(s) each")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
