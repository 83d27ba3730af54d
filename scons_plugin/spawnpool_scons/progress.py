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
per unit built: the last build's of the same targets (the history), else this build's
so far, else 1; the pool counts the commands submitted, and the history gives their
durations (engine/src/progress/build_progress.h).  At the end, N = M = what ran, and the
units built go into the history with the build's shape.

Hooks (feature-detected by the plugin: SCons.Script.Main.BuildTask's make_ready and
executed, in every SCons 4.x): both run in the thread that holds the Taskmaster (the
main thread; NewParallel's workers under its lock); a lock of ours guards the count all
the same.
"""

import threading

__all__ = ['install', 'units_to_build']


def install(build_task, session_for):
    """Follow `build_task`'s make_ready and executed; `session_for()` gives the session
    whose status line shows the count, or None (no status line: the hooks do nothing)."""
    count = _Count(session_for)
    _after(build_task, 'make_ready', count.evaluated)
    _after(build_task, 'executed', count.executed)


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
        self._last_per_unit = None  # commands per unit in the last build of these targets

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
            self._update()

    def executed(self, task):
        with self._lock:
            if self._status is None:
                return
            # executed() follows up-to-date tasks too: a unit built had targets out of date.
            if getattr(task, 'out_of_date', None) and task.targets[0].has_builder():
                self._executed += 1
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
        for unit in units_to_build(top):
            kind = _kind(unit)
            self._units[_unit_key(unit)] = kind
            self._left[kind] = self._left.get(kind, 0) + 1

    def _update(self):
        if self._last_per_unit is not None:
            per_unit = self._last_per_unit
        else:
            done = self._status.view()['done']
            per_unit = done / self._executed if self._executed else 1.0
        self._status.expect(round(self._to_build() * per_unit))
        self._status.progress.set_units_built(self._executed)

    def _to_build(self):
        """How many of the units left will be built: of each kind (objects, libraries,
        programs: the suffix of their targets), as many as of those made ready so far were
        out of date, counting one more that was (so a kind not met yet is built whole,
        and a clean build stays whole). An incremental build finds most units up to date
        as it goes, and a library or program is out of date far more often than the
        objects under it."""
        return sum(left * (self._rebuilt.get(kind, 0) + 1) / (self._seen.get(kind, 0) + 1)
                   for kind, left in self._left.items())


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
