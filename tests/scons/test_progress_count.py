"""The status line's count (scons_plugin/spawnpool_scons/progress.py): commands per unit
kept per kind of unit (the suffix of its targets: an object takes one command, a static
library two, ar and ranlib), from the history's last build of the same targets, else
this build's so far; and what the history keeps of them.  The count is driven through
its hooks with stand-ins for SCons' tasks and the status, so the totals it expects are
exact; the last test runs a real SCons build and reads what reached the history."""

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
                        lambda top: [Executor(t) for t in targets.values()])

    class Session:
        pass
    session = Session()
    session.status = status
    return progress._Count(lambda: session), targets


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
    assert progress.parse_kinds(status.progress.kinds) == {'o': [9, 9, 9, 9], 'a': [1, 2, 1, 1]}
    assert status.progress.units_built == 10


def test_the_history_keeps_each_kind_and_the_last_builds_for_kinds_not_built(monkeypatch):
    status = Status(Progress((14, 12), LAST_CLEAN_BUILD))
    count, targets = count_with(monkeypatch, status)
    tm = Taskmaster()
    task = Task(targets['sub/a0.o'], True, tm)
    count.evaluated(task)
    task._spawnpool_commands = 1
    count.executed(task)
    # a0.o rebuilt, found out of date of 1 made ready; the libraries and the program not
    # made ready yet (a build stopped here): their commands per unit are the last build's.
    assert progress.parse_kinds(status.progress.kinds) == {
        'o': [1, 1, 1, 1], 'a': [2, 4, 0, 0], '': [1, 1, 0, 0]}


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
