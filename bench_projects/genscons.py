#!/usr/bin/python3
"""Generate a deterministic C build tree of the genscons.pl shape.

The tree is the one Electric Cloud's genscons.pl made famous (and SCons PR
#3703/#3719 benchmarked): `levels` deep, `dirs` subdirectories per directory,
`files` C sources per directory, `lookups` include directories that every
header search walks through before it reaches the real one. Each directory
groups its library sources `group` at a time into static libraries and links
one program (`prog`) from its main source (`prog.c`) and those libraries.

The same tree builds with `scons -jN` (in-tree, SConstruct at the top and an
SConscript per directory) and with `make -jN O=OUTDIR` (one non-recursive
Makefile; OUTDIR mirrors the tree). Every program prints its directory and a
checksum the generator computes too, so `verify_outputs.py` can compare builds.

Same arguments -> byte-identical tree: all "random" constants are hashes of
(seed, name), never a random-number sequence.

Python 3 standard library only; runs under /usr/bin/python3.
"""

import argparse
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass

MANIFEST_NAME = "genscons.json"
PROGRAM_NAME = "prog"
MAIN_SOURCE = PROGRAM_NAME + ".c"
HEADER_DIR = "include"
CFLAGS = "-Wall"

# The generated C code does all its arithmetic modulo this prime. Inputs stay
# below it and multipliers below 2**16, so no unsigned 32-bit product can wrap
# and the Python mirror in `expected_output` needs no overflow emulation.
MODULUS = 65521

GENSCONS_DEFAULTS = dict(levels=2, dirs=3, files=500, lookups=2, group=20)
PRESETS = {
    # 7 directories x 6 sources; groups of 2 leave a one-source library.
    "small": dict(levels=3, dirs=2, files=6, lookups=2, group=2),
    # 13 directories, 3 levels deep, 4,160 sources.
    "medium": dict(levels=3, dirs=3, files=320, lookups=2, group=20),
    # genscons.pl -f 4000: the 16,000-source tree of SCons PR #3703/#3719.
    "large": dict(levels=2, dirs=3, files=4000, lookups=2, group=20),
}


@dataclass(frozen=True)
class Params:
    levels: int
    dirs: int
    files: int
    lookups: int
    group: int
    seed: int
    # Libraries of varied weight (--mixed), as a real tree has heavy components; off:
    # every source alike, as genscons.pl makes them.
    mixed: bool = False


def shape_items(params):
    """The parameters as (name, value) pairs for the generated files and the summary;
    `mixed` only when set, so that a uniform tree stays byte-identical to before it."""
    return [(k, v) for k, v in asdict(params).items() if k != "mixed" or v]


@dataclass(frozen=True)
class Directory:
    """One source directory of the tree."""

    path: str       # relative to the tree root; "." for the root itself
    tag: str        # C identifier prefix, unique in the tree
    ancestors: tuple  # tags of the enclosing directories, root first
    children: tuple   # paths of the subdirectories


# ---------------------------------------------------------------- the shape

def walk_directories(params):
    """All directories, parents before children, in a fixed order."""
    directories = []

    def visit(path, tag, ancestors, level):
        names = [f"d{level}_{i}" for i in range(params.dirs)] if level < params.levels else []
        children = tuple(join(path, name) for name in names)
        directories.append(Directory(path, tag, ancestors, children))
        for name, child in zip(names, children):
            child_tag = name if path == "." else f"{tag}_{name}"
            visit(child, child_tag, ancestors + (tag,), level + 1)

    visit(".", "top", (), 1)
    return directories


def join(path, name):
    return name if path == "." else f"{path}/{name}"


def library_groups(params):
    """Indices of the library sources, `group` at a time; the last may be short."""
    indices = list(range(params.files - 1))  # one of the `files` is prog.c
    return [indices[i:i + params.group] for i in range(0, len(indices), params.group)]


def stem(index):
    return f"f{index:05d}"


def function_name(directory, index):
    return f"{directory.tag}_{stem(index)}"


def library_name(directory, group_index):
    return f"{directory.tag}_g{group_index:03d}"


def lookup_dirs(params, directory):
    return [join(directory.path, f"lup{i:03d}") for i in range(params.lookups)]


def include_path(params, directory):
    """Header search order: the empty lookup dirs, then own and ancestors' headers."""
    own_and_up = [directory.path]
    while own_and_up[-1] != ".":
        own_and_up.append(os.path.dirname(own_and_up[-1]) or ".")
    return lookup_dirs(params, directory) + [join(p, HEADER_DIR) for p in own_and_up]


def counts(params):
    directories = sum(params.dirs ** level for level in range(params.levels))
    libraries = directories * len(library_groups(params))
    sources = directories * params.files
    return {
        "directories": directories,
        "lookup_dirs": directories * params.lookups,
        "sources": sources,
        # one header per library source plus one per directory
        "headers": directories * params.files,
        "objects": sources,
        "libraries": libraries,
        "programs": directories,
        "sconscripts": directories,
        "makefiles": directories + 1,
        # SCons runs `ar` and `ranlib` as two commands per library.
        "scons_commands": sources + 2 * libraries + directories,
    }


# -------------------------------------------- constants and expected output

def constant(seed, *names, low=0, high=MODULUS):
    """A value in [low, high) fixed by seed and names (stable across Pythons)."""
    digest = hashlib.sha256(":".join([str(seed), *names]).encode()).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low)


def multiplier(params, tag):
    return constant(params.seed, tag, "multiplier", low=1, high=1 << 16)


def salt(params, tag):
    return constant(params.seed, tag, "salt")


def addend(params, directory, index):
    return constant(params.seed, directory.tag, stem(index))


def mix(params, tag, x):
    return (x * multiplier(params, tag) + salt(params, tag)) % MODULUS


def library_function(params, directory, index, x):
    """Python mirror of the C function generated by `render_library_source`."""
    y = (mix(params, directory.tag, x) + addend(params, directory, index)) % MODULUS
    for ancestor in directory.ancestors:
        y = (y + mix(params, ancestor, y)) % MODULUS
    return y


# A mixed tree's library weights: the share of the libraries whose every source compiles
# about this many times as long as a plain one (the rest weigh 1). Real trees are not
# uniform (a component of heavy templates beside small C files): what a history-based
# ETA has to know and a count of commands does not.
LIBRARY_WEIGHTS = ((8, 0.10), (3, 0.25))
# Padding functions per unit of weight above 1: each costs the compiler about 1 ms of
# CPU at -O0 on the benchmark machines; a plain source's compile takes 20-70 ms.
PAD_FUNCTIONS_PER_WEIGHT = 20


def library_weight(params, directory, group_index):
    """How heavy the library `group_index` of `directory` is: 1 unless the tree is mixed."""
    if not params.mixed:
        return 1
    draw = constant(params.seed, directory.tag, f"g{group_index}", "weight", high=1000) / 1000
    for weight, share in LIBRARY_WEIGHTS:
        if draw < share:
            return weight
        draw -= share
    return 1


def expected_output(params, directory):
    """What the directory's program prints."""
    total = 0
    for group_index, group in enumerate(library_groups(params)):
        value = group_index + 1
        for index in group:  # each function hands its result to the next
            value = library_function(params, directory, index, value)
        total += value
    return f"{directory.path} {total}\n"


# ------------------------------------------------------------------ C code

def header_guard(name):
    return name.upper().replace(".", "_")


def render_dir_header(params, directory):
    name = f"{directory.tag}.h"
    guard = header_guard(name)
    return (
        f"#ifndef {guard}\n#define {guard}\n\n"
        f"static inline unsigned {directory.tag}_mix(unsigned x)\n{{\n"
        f"    return (x * {multiplier(params, directory.tag)}u"
        f" + {salt(params, directory.tag)}u) % {MODULUS}u;\n}}\n\n"
        f"#endif\n"
    )


def render_source_header(directory, index):
    function = function_name(directory, index)
    guard = header_guard(f"{function}.h")
    return f"#ifndef {guard}\n#define {guard}\n\nunsigned {function}(unsigned x);\n\n#endif\n"


def render_padding(function, weight):
    """Functions nothing calls (emitted all the same: not static) that make a source of a
    heavy library take longer to compile; none for weight 1."""
    lines = []
    for i in range((weight - 1) * PAD_FUNCTIONS_PER_WEIGHT):
        lines += ["", f"unsigned {function}_pad{i}(unsigned x)", "{", "    unsigned y = x;",
                  f"    for (unsigned k = 0; k < {i % 7 + 3}u; ++k)",
                  f"        y = (y * {i * 31 % MODULUS + 1}u + k) % {MODULUS}u;",
                  f"    return y ^ {i}u;", "}"]
    return lines


def render_library_source(params, directory, group, position, weight=1):
    index = group[position]
    next_index = group[position + 1] if position + 1 < len(group) else None
    lines = [f"#include <{function_name(directory, index)}.h>"]
    if next_index is not None:
        lines.append(f"#include <{function_name(directory, next_index)}.h>")
    lines += [f"#include <{tag}.h>" for tag in (directory.tag,) + directory.ancestors]
    lines += [
        "",
        f"unsigned {function_name(directory, index)}(unsigned x)",
        "{",
        f"    unsigned y = ({directory.tag}_mix(x) + {addend(params, directory, index)}u)"
        f" % {MODULUS}u;",
    ]
    lines += [f"    y = (y + {tag}_mix(y)) % {MODULUS}u;" for tag in directory.ancestors]
    if next_index is None:
        lines.append("    return y;")
    else:
        lines.append(f"    return {function_name(directory, next_index)}(y);")
    lines.append("}")
    lines += render_padding(function_name(directory, index), weight)
    return "\n".join(lines) + "\n"


def render_main_source(params, directory):
    entries = [function_name(directory, group[0]) for group in library_groups(params)]
    lines = ["#include <stdio.h>"]
    lines += [f"#include <{entry}.h>" for entry in entries]
    lines += ["", "int main(void)", "{", "    unsigned long total = 0;"]
    lines += [f"    total += {entry}({i + 1}u);" for i, entry in enumerate(entries)]
    lines += [f'    printf("%s %lu\\n", "{directory.path}", total);', "    return 0;", "}"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- SCons

def scons_path(path):
    """Top-relative SCons path, so flags match the Makefile's -I and -L."""
    return "#" if path == "." else f"#{path}"


def render_sconscript(params, directory):
    is_top = directory.path == "."
    groups = library_groups(params)
    cpppath = ", ".join(repr(scons_path(p)) for p in include_path(params, directory))
    lines = [f"# Generated by bench_projects/genscons.py (directory {directory.path})."]
    if is_top:
        lines += [
            "# Builds in-tree; run `scons -jN` here.",
            "Help('''Generated genscons-shaped tree:",
            *(f"    {key} = {value}" for key, value in shape_items(params)),
            "''')",
        ]
    lines += [
        "",
        "# A fresh Environment per directory, as genscons.pl does; the lookup",
        "# directories come first so every header search walks past them.",
        f"env = Environment(CPPPATH=[{cpppath}],",
        f"                  LIBPATH=[{scons_path(directory.path)!r}],",
        f"                  CCFLAGS=[{CFLAGS!r}])",
        "",
    ]
    for group_index, group in enumerate(groups):
        sources = ", ".join(repr(stem(i) + ".c") for i in group)
        lines.append(f"env.Library({library_name(directory, group_index)!r}, [{sources}])")
    libs = ", ".join(repr(library_name(directory, g)) for g in range(len(groups)))
    lines.append(f"env.Program({PROGRAM_NAME!r}, [{MAIN_SOURCE!r}], LIBS=[{libs}])")
    if directory.children:
        scripts = ", ".join(repr(f"{os.path.basename(c)}/SConscript") for c in directory.children)
        lines += ["", f"SConscript([{scripts}])"]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------- make

def make_path(path, name):
    return f"$(O)/{join(path, name)}"


def render_module_mk(params, directory):
    tag, path = directory.tag, directory.path
    out_dir = "$(O)" if path == "." else f"$(O)/{path}"
    objects = [make_path(path, stem(i) + ".o") for group in library_groups(params) for i in group]
    objects.append(make_path(path, PROGRAM_NAME + ".o"))
    includes = " ".join(f"-I{p}" for p in include_path(params, directory))
    lines = [
        f"# Generated by bench_projects/genscons.py (directory {path}).",
        f"{tag}_OBJECTS := {' '.join(objects)}",
        f"$({tag}_OBJECTS): INCLUDES := {includes}",
        f"$({tag}_OBJECTS): | {out_dir}",
        f"{out_dir}:",
        "\tmkdir -p $@",
        "",
    ]
    libraries = []
    for group_index, group in enumerate(library_groups(params)):
        library = make_path(path, f"lib{library_name(directory, group_index)}.a")
        members = " ".join(make_path(path, stem(i) + ".o") for i in group)
        lines.append(f"{library}: {members}")
        libraries.append(library)
    program = make_path(path, PROGRAM_NAME)
    lines += [
        "",
        f"{program}: {make_path(path, PROGRAM_NAME + '.o')} {' '.join(libraries)}".rstrip(),
        "\t$(CC) $(LDFLAGS) -o $@ $^",
        "",
        f"OBJECTS += $({tag}_OBJECTS)",
        f"PROGRAMS += {program}",
    ]
    return "\n".join(lines) + "\n"


def render_top_makefile(params, directories):
    modules = [join(d.path, "module.mk") for d in directories]
    settings = " ".join(f"{key}={value}" for key, value in shape_items(params))
    return "\n".join([
        f"# Generated by bench_projects/genscons.py ({settings}).",
        "# Non-recursive: one make sees every target, so -jN spans the whole tree.",
        "# Usage: make -jN O=OUTDIR   (run here; OUTDIR mirrors the tree).",
        "MAKEFLAGS += --no-builtin-rules",
        ".SUFFIXES:",
        "O ?= build-make",
        f"CFLAGS ?= {CFLAGS}",
        "",
        ".PHONY: all clean",
        "all:",
        "",
        "OBJECTS :=",
        "PROGRAMS :=",
        *(f"include {module}" for module in modules),
        "",
        "all: $(PROGRAMS)",
        "",
        "$(O)/%.o: %.c",
        "\t$(CC) $(CFLAGS) $(INCLUDES) -MMD -MP -c -o $@ $<",
        "",
        "# Members come from each module's `lib...a: objects` line.",
        "$(O)/%.a:",
        "\t$(AR) rcs $@ $^",
        "",
        "clean:",
        "\trm -rf $(O)",
        "",
        "-include $(OBJECTS:.o=.d)",
    ]) + "\n"


# ----------------------------------------------------------------- writing

def tree_files(params):
    """Every generated file as (relative path, text), in a fixed order."""
    directories = walk_directories(params)
    yield "Makefile", render_top_makefile(params, directories)
    yield MANIFEST_NAME, render_manifest(params, directories)
    for directory in directories:
        script = "SConstruct" if directory.path == "." else "SConscript"
        yield join(directory.path, script), render_sconscript(params, directory)
        yield join(directory.path, "module.mk"), render_module_mk(params, directory)
        headers = join(directory.path, HEADER_DIR)
        yield join(headers, f"{directory.tag}.h"), render_dir_header(params, directory)
        for group_index, group in enumerate(library_groups(params)):
            weight = library_weight(params, directory, group_index)
            for position, index in enumerate(group):
                yield (join(headers, function_name(directory, index) + ".h"),
                       render_source_header(directory, index))
                yield (join(directory.path, stem(index) + ".c"),
                       render_library_source(params, directory, group, position, weight))
        yield join(directory.path, MAIN_SOURCE), render_main_source(params, directory)


def render_manifest(params, directories):
    """What verify_outputs.py needs to check a build of this tree."""
    per_directory = [{
        "path": d.path,
        "objects": params.files,
        "libraries": len(library_groups(params)),
        "program": join(d.path, PROGRAM_NAME),
        "output": expected_output(params, d),
    } for d in directories]
    manifest = {"params": dict(shape_items(params)), "counts": counts(params),
                "directories": per_directory}
    return json.dumps(manifest, indent=2) + "\n"


def write_tree(params, out):
    if os.path.exists(out) and os.listdir(out):
        raise SystemExit(f"genscons: {out} is not empty; stale files would break determinism")
    for directory in walk_directories(params):
        for lookup in lookup_dirs(params, directory):
            os.makedirs(os.path.join(out, lookup), exist_ok=True)
    for relative, text in tree_files(params):
        target = os.path.join(out, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


# --------------------------------------------------------------------- CLI

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        help="start from a named shape; explicit options override it")
    parser.add_argument("--levels", "-l", type=int, help="directory depth, top included")
    parser.add_argument("--dirs", "-d", type=int, help="subdirectories per directory")
    parser.add_argument("--files", "-f", type=int,
                        help="C sources per directory, prog.c included")
    parser.add_argument("--lookups", "-u", type=int,
                        help="empty include dirs searched before the real one")
    parser.add_argument("--group", "-g", type=int, help="library sources per static library")
    parser.add_argument("--seed", type=int, default=1, help="varies the generated constants")
    parser.add_argument("--mixed", action="store_true",
                        help="libraries of varied weight: a hashed 10%% of them compile 8x as "
                             "long, 25%% 3x (a real tree's heavy components)")
    parser.add_argument("--out", help="directory to create (must be absent or empty)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    shape = dict(PRESETS[args.preset] if args.preset else GENSCONS_DEFAULTS)
    shape.update({k: v for k, v in vars(args).items() if k in shape and v is not None})
    params = Params(seed=args.seed, mixed=args.mixed, **shape)
    minimums = dict(levels=1, dirs=1, files=1, lookups=0, group=1)
    for name, minimum in minimums.items():
        if getattr(params, name) < minimum:
            parser.error(f"--{name} must be at least {minimum}")
    return args, params


def describe(params, expected):
    settings = "\n".join(f"  {key:<8} = {value}" for key, value in shape_items(params))
    totals = "\n".join(f"  {key:<15} {value:>9,}" for key, value in expected.items())
    return f"Parameters:\n{settings}\nExpecting:\n{totals}\n"


def main():
    args, params = parse_args(sys.argv[1:])
    expected = counts(params)
    if args.out:
        write_tree(params, args.out)
    if args.json:
        print(json.dumps({"params": dict(shape_items(params)), "counts": expected}, indent=2))
    else:
        sys.stdout.write(describe(params, expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
