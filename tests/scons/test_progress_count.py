"""The status line's count (scons_plugin/spawnpool_scons/progress.py): commands per unit
kept per kind of unit (the suffix of its targets: an object takes one command, a static
library two, ar and ranlib), from the history's last build of the same targets, else
this build's so far; and what the history keeps of them.  The count is driven through
its hooks with stand-ins for SCons' tasks and the status, so the totals it expects are
exact; the last test runs a real SCons build and reads what reached the history."""

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'scons_plugin'))
from spawnpool_scons import progress  # noqa: E402


class Target:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def has_builder(self):
        return True


class Executor:
    def __init__(self, target):
        self.target = target

    def get_all_targets(self):
        return [self.target]


class Progress:
    """BuildProgress as the count uses it, with a last build of the targets."""

    def __init__(self, last_build=(0, 0), last_kinds=''):
        self._last_build, self._last_kinds = last_build, last_kinds
        self.units_built, self.kinds = 0, ''
        self.outputs = None

    def expect_outputs(self, paths):
        self.outputs = list(paths)

    def last_build(self):
        return self._last_build

    def last_build_kinds(self):
        return self._last_kinds

    def set_units_built(self, units):
        self.units_built = units

    def set_unit_kinds(self, kinds):
        self.kinds = kinds


class Status:
    def __init__(self, progress_):
        self.progress, self.expected, self.done = progress_, [], 0

    def begin(self, top_dir, targets):
        return self.progress

    def expect(self, commands):
        self.expected.append(commands)

    def view(self):
        return {'done': self.done}


class Task:
    def __init__(self, target, out_of_date, taskmaster):
        self.targets, self.out_of_date, self.tm = [target], out_of_date, taskmaster


class Taskmaster:
    original_top = ()


# 9 objects, 2 static libraries, 1 program: 14 commands (the program has no suffix).
TARGETS = (['sub/a%d.o' % i for i in range(5)] + ['sub/b%d.o' % i for i in range(4)]
           + ['sub/libone.a', 'sub/libtwo.a', 'sub/prog'])
LAST_CLEAN_BUILD = '9 9 9 9 o\n2 4 2 2 a\n1 1 1 1 \n'   # what a clean build of TARGETS leaves


def count_with(monkeypatch, status):
    targets = {name: Target(name) for name in TARGETS}
    monkeypatch.setattr(progress, 'units_to_build',
                        lambda top, graph=None: [Executor(t) for t in targets.values()])

    class Session:
        pass
    session = Session()
    session.status = status
    return progress._Count(lambda: session), targets


def hooked_build_task(monkeypatch, session):
    """A BuildTask-like class with install()'s hooks on it, and its stock methods."""
    monkeypatch.setattr(progress, '_hooks', [])
    monkeypatch.setattr(progress, '_count', None)
    monkeypatch.setattr(progress, 'units_to_build', lambda top, graph=None: [])

    class BuildTask:
        def make_ready(self):
            pass

        def execute(self):
            pass

        def executed(self):
            pass
    stock = dict(vars(BuildTask))
    progress.install(BuildTask, lambda: session)
    return BuildTask, stock


def test_without_a_status_line_the_first_task_puts_the_stock_methods_back(monkeypatch):
    build_task, stock = hooked_build_task(monkeypatch, None)
    names = ('make_ready', 'execute', 'executed')
    assert all(getattr(build_task, name) is not stock[name] for name in names)
    task = build_task()
    task.targets, task.out_of_date, task.tm = [Target('a.o')], True, Taskmaster()
    build_task.make_ready(task)
    assert all(getattr(build_task, name) is stock[name] for name in names)
    progress.finish()           # the plugin's exit handler: nothing to give


def test_with_a_status_line_the_hooks_stay(monkeypatch):
    class Session:
        status = Status(Progress())
    build_task, stock = hooked_build_task(monkeypatch, Session())
    task = build_task()
    task.targets, task.out_of_date, task.tm = [Target('a.o')], True, Taskmaster()
    build_task.make_ready(task)
    assert build_task.make_ready is not stock['make_ready']
    assert build_task.make_ready.__wrapped__ is stock['make_ready']


def test_an_incremental_build_expects_two_commands_per_library(monkeypatch):
    # The last build (a clean one) ran 14 commands for 12 units: 1.17 per unit over all
    # kinds. One object out of date: once the objects are found up to date, the two
    # libraries and the program are left, whole (none of their kind made ready yet):
    # 2 x 2 + 1 = 5 commands, not 3 x 1.17 = 3.5.
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    count, targets = count_with(monkeypatch, status)
    tm = Taskmaster()
    for name in TARGETS[:9]:
        count.evaluated(Task(targets[name], name == 'sub/a0.o', tm))
    assert status.expected[-1] == 5
    count.evaluated(Task(targets['sub/libone.a'], True, tm))
    # The other library: built as often as the one seen (1 of 1, counting one more: 1)
    # is 2 more, the program 1.
    assert status.expected[-1] == 3


def test_without_a_history_a_kind_takes_this_builds_commands_per_unit(monkeypatch):
    status = Status(Progress())
    count, targets = count_with(monkeypatch, status)
    tm = Taskmaster()
    for name in TARGETS[:9]:
        task = Task(targets[name], True, tm)
        count.evaluated(task)
        task._spawnpool_commands = 1
        count.executed(task)
    status.done = 9
    library = Task(targets['sub/libone.a'], True, tm)
    count.evaluated(library)
    library._spawnpool_commands = 2         # ar and ranlib, counted by the plugin
    status.done = 11
    count.executed(library)
    # Left: a library (2 per unit, this build's) and the program (a kind not built yet: 1).
    assert status.expected[-1] == 2 + 1
    assert status.progress.units_built == 0     # given once, by finish(): only the history reads it
    count.finish()
    assert progress.parse_kinds(status.progress.kinds) == {'o': [9, 9, 9, 9], 'a': [1, 2, 1, 1]}
    assert status.progress.units_built == 10


def test_an_update_without_a_history_takes_one_view_at_most(monkeypatch):
    # Two kinds not built yet (the libraries, the program) take this build's commands per
    # unit over all kinds: from one view an update, not one a kind (a view is the ETA's
    # arithmetic); none before a unit is built.
    views = []

    class CountingStatus(Status):
        def view(self):
            views.append(self.done)
            return super().view()
    status = CountingStatus(Progress())
    count, targets = count_with(monkeypatch, status)
    tm = Taskmaster()
    first = Task(targets[TARGETS[0]], True, tm)
    count.evaluated(first)
    assert views == []
    for name in TARGETS[1:9]:
        task = Task(targets[name], True, tm)
        count.evaluated(task)
        task._spawnpool_commands = 1
        status.done += 1
        count.executed(task)
    assert 0 < len(views) <= len(status.expected)
    assert status.expected[-1] == 3     # two libraries and the program, 1 command a unit


def test_the_history_keeps_each_kind_and_the_last_builds_for_kinds_not_built(monkeypatch):
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    count, targets = count_with(monkeypatch, status)
    tm = Taskmaster()
    task = Task(targets['sub/a0.o'], True, tm)
    count.evaluated(task)
    task._spawnpool_commands = 1
    count.executed(task)
    assert status.progress.kinds == ''     # given once, at the end
    count.finish()
    # a0.o rebuilt, found out of date of 1 made ready; the libraries and the program not
    # made ready yet (a build stopped here): their commands per unit are the last build's.
    assert progress.parse_kinds(status.progress.kinds) == {
        'o': [1, 1, 1, 1], 'a': [2, 4, 0, 0], '': [1, 1, 0, 0]}


class File:
    """SCons' File node as the walk and the prior use it: a real file under the test's
    directory, a builder or not, its explicit children."""

    builder = None          # no target scanner: LIBS are given as explicit children here

    def __init__(self, path, children=None):
        self.path, self._children = str(path), list(children or ())
        self.executor = Executor(self) if children is not None else None

    def __str__(self):
        return self.path

    def has_builder(self):
        return self.executor is not None

    def get_executor(self):
        return self.executor

    def children(self, scan=1):
        return self._children

    def get_abspath(self):
        return self.path

    def srcnode(self):
        return self


def libs_tree_nodes(root):
    """TARGETS as nodes on files under `root`: a library of a0-a4.o, one of b0-b3.o, a
    program of main.o and both; the sources written, the outputs not."""
    sub = root / 'sub'
    sub.mkdir(parents=True, exist_ok=True)
    nodes, sources = {}, []
    for name in TARGETS[:9] + ['sub/main.o']:
        source = File(root / name.replace('.o', '.c'))
        Path(source.path).write_text('int f(void) { return 1; }\n')
        sources.append(source)
        nodes[name] = File(root / name, [source])
    nodes['sub/libone.a'] = File(root / 'sub/libone.a', [nodes[n] for n in TARGETS[:5]])
    nodes['sub/libtwo.a'] = File(root / 'sub/libtwo.a', [nodes[n] for n in TARGETS[5:9]])
    nodes['sub/prog'] = File(root / 'sub/prog', [nodes['sub/main.o'], nodes['sub/libone.a'],
                                                 nodes['sub/libtwo.a']])
    return nodes


def made(nodes, names, mtime_s):
    for name in names:
        Path(nodes[name].path).write_text('built\n')
        os.utime(nodes[name].path, (mtime_s, mtime_s))


# The order SCons makes them ready in (a unit after the units under it), and what each runs.
ORDER = TARGETS[:5] + ['sub/libone.a'] + TARGETS[5:9] + ['sub/libtwo.a', 'sub/main.o', 'sub/prog']
COMMANDS = dict({name: 1 for name in ORDER}, **{'sub/libone.a': 2, 'sub/libtwo.a': 2})
ALL_OUTPUTS = list(ORDER)


def drive(nodes, status, out_of_date):
    """Make ORDER ready and build the units in `out_of_date`, as SCons (-j1) would; the
    total the line shows after each update: the commands the pool has (submitted) and
    those the count expects, and the commands of the unit made ready that the pool has
    not got yet, by the unit's name.  A unit made ready has its commands counted when the pool
    gets them (between the two it is in neither: see the totals' second figure)."""
    count = progress._Count(lambda: Session(status))
    tm = Taskmaster()
    tm.original_top = [nodes['sub/prog']]
    totals = []
    for name in ORDER:
        task = Task(nodes[name], name in out_of_date, tm)
        count.evaluated(task)
        ran = COMMANDS[name] if name in out_of_date else 0
        totals.append((name, status.done + status.expected[-1], ran))
        if ran:
            task._spawnpool_commands = ran
            status.done += ran
            count.executed(task)
            totals.append((name, status.done + status.expected[-1], 0))
    count.finish()
    return totals


class Session:
    def __init__(self, status):
        self.status = status


def test_an_edit_of_sources_is_counted_exactly_from_the_first_update(tmp_path):
    # The outputs of a clean build, then a0.c and b2.c edited: a0.o, b2.o, both libraries
    # and the program are out of date (7 commands).  Before the prior the first update
    # expected the whole tree (13 more), and the total came down as units were met.
    nodes = libs_tree_nodes(tmp_path)
    made(nodes, ALL_OUTPUTS, 2000000000)
    for name in ('sub/a0.c', 'sub/b2.c'):
        os.utime(str(tmp_path / name), (2000000100, 2000000100))
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    rebuilt = {'sub/a0.o', 'sub/b2.o', 'sub/libone.a', 'sub/libtwo.a', 'sub/prog'}
    totals = drive(nodes, status, rebuilt)
    assert all(total + in_flight == 7 for _, total, in_flight in totals), totals
    # The files of the units known out of date go to the progress, whose history predicts
    # the commands that will write them (once, at the first update).
    assert sorted(status.progress.outputs) == sorted(str(tmp_path / name) for name in rebuilt)
    assert progress.parse_kinds(status.progress.kinds) == {
        'o': [2, 2, 2, 10], 'a': [2, 4, 2, 2], '': [1, 1, 1, 1]}


def test_a_first_build_and_a_clean_one_are_exact_from_the_first_update(tmp_path):
    nodes = libs_tree_nodes(tmp_path)
    # No outputs: every unit is out of date.  With the last build's commands per kind the
    # total is exact at every update; without a history a kind not built yet is counted
    # at one command a unit (the libraries' ranlib shows once the first is built).
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    totals = drive(nodes, status, set(ORDER))
    assert all(total + in_flight == 15 for _, total, in_flight in totals), totals
    status = Status(Progress())
    totals = drive(nodes, status, set(ORDER))
    assert totals[0] == ('sub/a0.o', 12, 1) and totals[-1] == ('sub/prog', 15, 0), totals


def test_a_header_edit_converges_and_what_depends_on_it_follows(tmp_path):
    # A header that a0.c and b0.c include changed: no explicit source is newer, so the
    # prior knows nothing; a0.o found out of date makes libone and the program known
    # out of date at once (they are above it), and the objects left are estimated by
    # the share found out of date of those not known.
    nodes = libs_tree_nodes(tmp_path)
    made(nodes, ALL_OUTPUTS, 2000000000)
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    rebuilt = {'sub/a0.o', 'sub/b0.o', 'sub/libone.a', 'sub/libtwo.a', 'sub/prog'}
    totals = drive(nodes, status, rebuilt)
    # a0.o out of date: libone (2) and the program (1) whole, the 9 objects left at the
    # share of 1 in 2 (4.5), libtwo at none yet.
    assert totals[0] == ('sub/a0.o', 8, 1), totals
    assert totals[-1] == ('sub/prog', 7, 0), totals
    # From the last object on, exact (before, within the share's error).
    last_object = [name for name, _, _ in totals].index('sub/main.o')
    assert all(total + in_flight == 7 for _, total, in_flight in totals[last_object:]), totals
    assert all(abs(total + in_flight - 7) <= 2 for _, total, in_flight in totals), totals


def test_a_prior_that_fails_gives_the_estimate_of_before(tmp_path, monkeypatch):
    nodes = libs_tree_nodes(tmp_path)
    made(nodes, ALL_OUTPUTS, 2000000000)
    os.utime(str(tmp_path / 'sub/a0.c'), (2000000100, 2000000100))

    def broken(units, graph):
        raise RuntimeError('a node of a kind never seen')
    monkeypatch.setattr(progress, 'known_out_of_date', broken)
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    totals = drive(nodes, status, {'sub/a0.o', 'sub/libone.a', 'sub/prog'})
    assert totals[0] == ('sub/a0.o', 14, 1) and totals[-1] == ('sub/prog', 4, 0), totals


def test_the_prior_stats_each_file_once(tmp_path):
    nodes = libs_tree_nodes(tmp_path)
    made(nodes, ALL_OUTPUTS, 2000000000)
    graph = progress._Graph()
    units = progress.units_to_build([nodes['sub/prog'], nodes['sub/libone.a']], graph)
    paths = []

    def stat(path):
        paths.append(path)
        return os.stat(path)
    known, parents = progress.known_out_of_date(units, graph, stat)
    assert known == set() and len(units) == 13
    assert sorted(paths) == sorted(set(paths)) and len(paths) == 13 + 10, paths
    assert parents[nodes['sub/a0.o']] == [nodes['sub/libone.a']]


def test_in_a_clean_tree_the_prior_stats_a_directory_once(tmp_path):
    # No outputs: the first target missing in sub/ has the directory listed, and the
    # other 12 targets there are missing without a stat each; no source needs one (a
    # unit whose target is missing is out of date as it is).
    nodes = libs_tree_nodes(tmp_path)
    graph = progress._Graph()
    units = progress.units_to_build([nodes['sub/prog']], graph)
    paths = []

    def stat(path):
        paths.append(path)
        return os.stat(path)
    known, _ = progress.known_out_of_date(units, graph, stat)
    assert len(units) == 13 and len(known) == 13
    assert len(paths) == 1, paths
    # Some outputs made: those are stat()ed (with their sources), the others are not.
    made(nodes, ['sub/a0.o', 'sub/a1.o'], 2000000000)
    paths.clear()
    known, _ = progress.known_out_of_date(units, graph, stat)
    assert len(known) == 13 - 2
    assert sorted(set(paths)) == sorted(paths)
    assert {nodes['sub/a0.o'].path, nodes['sub/a1.o'].path} <= set(paths)
    assert len(paths) <= 1 + 2 + 2, paths


def test_kinds_text_round_trip():
    kinds = {'o': [60, 60, 60, 600], 'a': [32, 64, 32, 32], '': [4, 4, 4, 4],
             'tar gz': [1, 3, 0, 1], 'h': [0, 0, 0, 5]}
    text = progress.format_kinds(kinds)
    assert progress.parse_kinds(text) == kinds
    assert progress.format_kinds({'c': [0, 0, 0, 0]}) == ''
    assert progress.parse_kinds('') == {}
    assert progress.parse_kinds('x 1 1 1 o\n3 3 1 2\n\n2 -1 1 1 a\n1 1 2 1 b\n1 2') == {
        '': [3, 3, 1, 2]}


LIBS_TREE = {
    'SConstruct': "SConscript('sub/SConscript')\n",
    'sub/SConscript': ("env = Environment()\n"
                       "env.Library('one', ['a0.c', 'a1.c', 'a2.c', 'a3.c', 'a4.c'])\n"
                       "env.Library('two', ['b0.c', 'b1.c', 'b2.c', 'b3.c'])\n"
                       "env.Program('prog', ['main.c'], LIBS=['one', 'two'], LIBPATH=['.'])\n"),
    'sub/main.c': "int a0(void); int b0(void);\nint main(void) { return a0() + b0() - 2; }\n",
}
for _i in range(5):
    for _lib in 'ab':
        if _lib == 'a' or _i < 4:
            LIBS_TREE['sub/%s%d.c' % (_lib, _i)] = 'int %s%d(void) { return 1; }\n' % (_lib, _i)


def test_a_real_build_leaves_each_kinds_commands_in_the_history(pool_module, project):
    # The plugin counts the commands of each task as it runs them (ar and ranlib for a
    # library), and the history keeps them by kind with the build's shape.
    if (project.root / 'SConstruct').exists():
        (project.root / 'SConstruct').unlink()
    for name, text in LIBS_TREE.items():
        (project.root / name).parent.mkdir(parents=True, exist_ok=True)
        (project.root / name).write_text(text)
    r = project.scons('-j2', '--process-spawner-status=plain', pool=True)
    assert r.returncode == 0, r
    history = project.root / '.spawnpool' / 'memory-history.sqlite'
    with sqlite3.connect(str(history)) as db:
        rows = [row[0] for row in db.execute('SELECT kinds FROM builds')]
    assert len(rows) == 1, rows
    kinds = progress.parse_kinds(rows[0])
    assert kinds['o'] == [10, 10, 10, 10] and kinds[''] == [1, 1, 1, 1], rows
    assert kinds['a'][0] == 2 and kinds['a'][1] in (2, 4), rows     # ranlib where there is one


# The totals the line showed after each update of the count (the view's: the commands
# the pool has and those the count expects), written at exit by the SConstruct.
TOTALS_SCONSTRUCT = """
import atexit, json, os
import spawnpool.status
_totals = []
_stock_expect = spawnpool.status.BuildStatus.expect
def _expect(self, commands):
    _stock_expect(self, commands)
    _totals.append(self.view()['total'])
spawnpool.status.BuildStatus.expect = _expect
def _write(path=os.path.join(Dir('#').abspath, os.pardir, 'totals.json')):
    with open(path, 'w') as f:
        json.dump(_totals, f)
atexit.register(_write)
SConscript('sub/SConscript')
"""


def test_a_real_build_is_counted_exactly_from_the_first_update(pool_module, project):
    # -j1: a unit made ready is built before the next one is made ready, so the total of
    # an update falls short of what runs by that unit's commands at most (2: a library).
    from test_status import PLAIN, commands_run, count_of, status_lines, trace_option
    if (project.root / 'SConstruct').exists():
        (project.root / 'SConstruct').unlink()
    tree = dict(LIBS_TREE, **{'SConstruct': TOTALS_SCONSTRUCT,
                              'sub/common.h': '#define ONE 1\n',
                              'sub/a0.c': '#include "common.h"\nint a0(void) { return ONE; }\n',
                              'sub/b0.c': '#include "common.h"\nint b0(void) { return ONE; }\n',
                              'sub/b3.c': 'int b3(void) { return 1; }\n'})
    for name, text in tree.items():
        (project.root / name).parent.mkdir(parents=True, exist_ok=True)
        (project.root / name).write_text(text)

    def build(*args):
        r = project.scons('-j1', PLAIN, trace_option(project), *args, pool=True)
        done, total, failed = count_of(status_lines(r)[1])
        ran = len(commands_run(project))
        assert done == total == ran, r
        return r, ran, failed, json.loads((project.root.parent / 'totals.json').read_text())

    r, ran, _, totals = build()
    assert r.returncode == 0 and ran >= 12, r
    assert project.scons('-c', pool=True).returncode == 0
    for what in ('clean', 'sources', 'header'):
        if what == 'sources':
            for name in ('sub/a1.c', 'sub/b2.c'):
                with open(project.root / name, 'a') as f:
                    f.write('int %s_changed(void) { return 2; }\n' % name[4:6])
        elif what == 'header':
            (project.root / 'sub/common.h').write_text('#define ONE 2\n')
        r, ran, _, totals = build()
        assert r.returncode == 0, r
        if what == 'header':        # found out of date as SCons goes: only N = M
            continue
        assert totals and all(ran - 2 <= total <= ran for total in totals), (what, ran, totals, r)
    # A failing command with -k: N = M, and the history keeps each kind's account.
    (project.root / 'sub/b3.c').write_text('int b3(void) { return }\n')
    r, ran, failed, totals = build('-k')
    assert r.returncode != 0 and failed == 1, r
    with sqlite3.connect(str(project.root / '.spawnpool' / 'memory-history.sqlite')) as db:
        rows = [row[0] for row in db.execute('SELECT kinds FROM builds')]
    kinds = progress.parse_kinds(rows[-1])
    assert kinds['o'][3] == 10 and kinds['o'][2] == 1, rows      # b3.o: the one out of date
