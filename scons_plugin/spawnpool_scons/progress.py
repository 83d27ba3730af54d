"""The status line's count of what SCons will build (issue 18 item 3).

SCons knows no total (SCons issue #2608).  When the build's first task is made ready,
the nodes under the Taskmaster's top targets are walked through their explicit children,
the libraries programs link (LIBS, as SCons' ProgramScanner finds them: by name, no file
read) and the entries of directories (what SCons' DirEntryScanner lists); no source is
scanned for includes (that is the build's own work, done later and cached).  Each File
node with a builder counts as one unit of work (an executor: the targets of one builder
call count once; an Entry not yet known as a File counts too).  Each unit leaves the
count when the Taskmaster makes its task ready: found up to date, or about to be built.
The units left are expected to be built as often as those of their kind (the suffix of
their targets: objects, libraries, programs) made ready so far were out of date (an
incremental build), and the commands still expected are those units times the commands
per unit of their kind (an object takes one, a static library two: ar and ranlib): the
last build's of the same targets (the history keeps each kind's units and commands with
the build's shape), else this build's so far, else the last build's over all kinds (a
history written before kinds were kept), else this build's over all kinds, else 1; the
pool counts the commands submitted, and the history gives their durations
(engine/src/progress/build_progress.h).  A unit's commands are those its task ran (the
plugin counts them per thread while the task executes).  At the end, N = M = what ran,
and the units built go into the history with the build's shape, with each kind's units
and commands (a kind not built this time keeps the last build's figures).

Hooks (feature-detected by the plugin: SCons.Script.Main.BuildTask's make_ready and
executed, in every SCons 4.x; execute where it has one): make_ready and executed run in
the thread that holds the Taskmaster (the main thread; NewParallel's workers under its
lock), execute in the thread that runs the task's commands; a lock of ours guards the
count all the same.
"""

import threading

__all__ = ['install', 'units_to_build', 'task_commands']


class _TaskCommands(threading.local):
    """The commands the task executing in this thread has run so far: the plugin adds one
    per command it runs (`task_commands.ran += 1`: no call, no lock on that path)."""
    ran = 0


task_commands = _TaskCommands()


def install(build_task, session_for):
    """Follow `build_task`'s make_ready, execute and executed; `session_for()` gives the
    session whose status line shows the count, or None (no status line: the hooks do
    nothing)."""
    count = _Count(session_for)
    _after(build_task, 'make_ready', count.evaluated)
    _after(build_task, 'executed', count.executed)
    if callable(getattr(build_task, 'execute', None)):
        _around_execute(build_task)


def _around_execute(build_task):
    """The task keeps the number of commands it ran (`_spawnpool_commands`, read by
    executed()), also when a command failed."""
    stock = build_task.execute

    def execute(self, *args, **kwargs):
        task_commands.ran = 0
        try:
            return stock(self, *args, **kwargs)
        finally:
            self._spawnpool_commands = task_commands.ran
    execute.__wrapped__ = stock
    build_task.execute = execute


def units_to_build(top):
    """The executors of the File nodes with a builder under the nodes `top`: through
    their explicit children, the libraries a program links (LIBS) and a directory's
    entries, the two kinds of children SCons finds only by scanning."""
    units, seen, stack = set(), set(), list(top)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        try:
            kind = node.__class__.__name__
            if kind in ('File', 'Entry') and node.has_builder():
                units.add(node.get_executor())
                stack.extend(_libraries(node))
            elif kind == 'Dir':
                stack.extend(_entries(node))
            stack.extend(node.children(scan=0))
        except Exception:       # a node of a kind we do not know: not counted
            pass
    return units


def _entries(directory):
    """What building a directory builds: the nodes SCons knows in it (its DirEntryScanner
    lists them, from Dir.entries, in every SCons 4.x); '.' and '..' are itself and its
    parent."""
    entries = getattr(directory, 'entries', None)
    if not isinstance(entries, dict):
        return ()
    return [node for name, node in entries.items() if name not in ('.', '..')]


def _libraries(node):
    """The libraries `node` (a program, a shared library) links: what its builder's
    target scanner, SCons' ProgramScanner, finds for LIBS in LIBPATH. That scanner
    looks names up among the nodes and directories and reads no file, so running it
    here is cheap; any other target scanner is left to the build."""
    scanner = getattr(getattr(node, 'builder', None), 'target_scanner', None)
    if scanner is None or getattr(scanner, 'name', None) != 'ProgramScanner':
        return ()
    executor = node.get_executor()
    path = executor.get_build_scanner_path(scanner)
    return scanner(node, executor.get_build_env(), path) or ()


def _after(owner, name, after):
    stock = getattr(owner, name)

    def hooked(self, *args, **kwargs):
        result = stock(self, *args, **kwargs)
        try:
            after(self)
        except Exception:       # the count must never break the build
            pass
        return result
    hooked.__wrapped__ = stock
    setattr(owner, name, hooked)


class _Count:
    def __init__(self, session_for):
        self._session_for = session_for
        self._lock = threading.Lock()
        self._begun = False
        self._status = None
        self._units = {}        # units not made ready yet -> their kind
        self._left = {}         # kind -> how many of self._units
        self._seen = {}         # kind -> units made ready so far
        self._rebuilt = {}      # kind -> of those, how many were out of date
        self._executed = 0      # units built
        self._built = {}        # kind -> [units built, the commands they ran]
        self._last_kinds = {}   # kind -> [units, commands, out of date, made ready] in
                                # the last build of these targets (format_kinds)
        self._last_per_unit = None  # commands per unit in it, over all kinds

    def evaluated(self, task):
        with self._lock:
            if not self._begun:
                self._begin(task)
            if self._status is None:
                return
            # The task's targets are its executor's (Taskmaster.next_task), first target
            # first; the executor itself may be gone already (an up-to-date node's).
            targets = task.targets
            kind = self._units.pop(targets[0], None) if targets else None
            if kind is not None:
                self._left[kind] -= 1
                self._seen[kind] = self._seen.get(kind, 0) + 1
                if getattr(task, 'out_of_date', None):
                    self._rebuilt[kind] = self._rebuilt.get(kind, 0) + 1
                    task._spawnpool_kind = kind     # a counted unit: executed() tallies it
            self._update()

    def executed(self, task):
        with self._lock:
            if self._status is None:
                return
            # executed() follows up-to-date tasks too: a unit built had targets out of date.
            if getattr(task, 'out_of_date', None) and task.targets[0].has_builder():
                self._executed += 1
                # Only the units counted (not a directory, whose task runs no command).
                ran = getattr(task, '_spawnpool_commands', None)
                kind = getattr(task, '_spawnpool_kind', None)
                if ran is not None and kind is not None:
                    built = self._built.setdefault(kind, [0, 0])
                    built[0] += 1
                    built[1] += ran
            self._update()

    def _begin(self, task):
        self._begun = True
        session = self._session_for()
        if session is None:
            return
        import os
        taskmaster = task.tm
        top = list(getattr(taskmaster, 'original_top', None) or [])
        self._status = session.status
        progress = self._status.begin(os.getcwd(), [str(node) for node in top])
        commands, units = progress.last_build()
        self._last_per_unit = commands / units if units else None
        self._last_kinds = parse_kinds(getattr(progress, 'last_build_kinds', str)())
        for unit in units_to_build(top):
            kind = _kind(unit)
            self._units[_unit_key(unit)] = kind
            self._left[kind] = self._left.get(kind, 0) + 1

    def _update(self):
        self._status.expect(round(sum(self._to_build(kind, left) * self._per_unit(kind)
                                      for kind, left in self._left.items())))
        self._status.progress.set_units_built(self._executed)
        self._status.progress.set_unit_kinds(self._kinds_text())

    def _to_build(self, kind, left):
        """How many of the `left` units of `kind` (objects, libraries, programs: the
        suffix of their targets) will be built: as many as of those made ready so far were
        out of date, counting one more that was (so a kind not met yet is built whole,
        and a clean build stays whole). An incremental build finds most units up to date
        as it goes, and a library or program is out of date far more often than the
        objects under it."""
        return left * (self._rebuilt.get(kind, 0) + 1) / (self._seen.get(kind, 0) + 1)

    def _per_unit(self, kind):
        """Commands per unit of `kind`: the last build's of these targets, else this
        build's so far, else the last build's over all kinds, else this build's, else 1."""
        for units, commands, *_ in (self._last_kinds.get(kind, _NONE), self._built.get(kind, _NONE)):
            if units:
                return commands / units
        if self._last_per_unit is not None:
            return self._last_per_unit
        done = self._status.view()['done']
        return done / self._executed if self._executed else 1.0

    def _kinds_text(self):
        """Each kind's units built and their commands for the history (this build's, else
        the last build's: a kind not built this time keeps them), with how many of the
        kind this build found out of date of those made ready."""
        kinds = {}
        for kind in set(self._last_kinds) | set(self._built) | set(self._seen):
            units, commands = (self._built.get(kind) or self._last_kinds.get(kind, _NONE))[:2]
            kinds[kind] = [units, commands, self._rebuilt.get(kind, 0), self._seen.get(kind, 0)]
        return format_kinds(kinds)


_NONE = (0, 0, 0, 0)


def format_kinds(kinds):
    """{kind: [units, commands, out of date, made ready]} as the history keeps it
    (BuildShape::kinds): a line `UNITS COMMANDS OUT_OF_DATE MADE_READY KIND` per kind,
    the kind last (it may be empty, or hold a space)."""
    return ''.join('%d %d %d %d %s\n' % (*figures, kind)
                   for kind, figures in sorted(kinds.items()) if figures[0] or figures[3])


def parse_kinds(text):
    """format_kinds' text back; a line it cannot read is left out."""
    kinds = {}
    for line in text.split('\n'):
        fields = line.split(' ', 4)
        try:
            figures = [int(field) for field in fields[:4]]
        except ValueError:
            continue
        if len(figures) == 4 and min(figures) >= 0 and figures[2] <= figures[3]:
            kinds[fields[4] if len(fields) > 4 else ''] = figures
    return kinds


def _unit_key(executor):
    """A unit by its first target: once SCons has found a node up to date, the node lets
    its executor go (get_executor() gives None), the task keeps its targets."""
    targets = executor.get_all_targets()
    return targets[0] if targets else executor


def _kind(executor):
    try:
        name = str(executor.get_all_targets()[0])
    except Exception:
        return ''
    base = name.rsplit('/', 1)[-1]
    return base.rsplit('.', 1)[-1] if '.' in base else ''
