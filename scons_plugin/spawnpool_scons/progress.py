"""The status line's count of what SCons will build (issue 18 item 3).

SCons knows no total (SCons issue #2608).  When the build's first task is made ready,
the nodes under the Taskmaster's top targets are walked through their explicit children,
the libraries programs link (LIBS, as SCons' ProgramScanner finds them: by name, no file
read) and the entries of directories (what SCons' DirEntryScanner lists); no source is
scanned for includes (that is the build's own work, done later and cached).  Each File
node with a builder counts as one unit of work (an executor: the targets of one builder
call count once; an Entry not yet known as a File counts too).  Each unit leaves the
count when the Taskmaster makes its task ready: found up to date, or about to be built.

The prior, as make decides (`known_out_of_date`, in the same walk): a unit is known to
be out of date when a target of it is missing, or older than a source file (an explicit
input no builder makes; in a variant directory, the file it is copied from) it depends
on, or when it depends on a unit known out of date (the objects of a library, the
libraries of a program; a unit SCons finds out of date makes those above it known as it
goes).  Each file gets one plain os.stat, once a build (SCons' own node stat caches
memoize: the build must find what it finds): in genscons' medium tree (4,160 sources,
4,381 units), 60-100 ms once on a built tree (8,541 stats, most of the time in them),
30-40 ms when nothing is built (no source is looked at then).  What it cannot see: a header (found by scanning), a changed command
line, a content decider that finds a touched file unchanged.  So the units left of each
kind (the suffix of their targets: objects, libraries, programs) are expected to be
built, apart for those known out of date and the others, as often as those of their kind
and group made ready so far were out of date: the known counting one more that was (a
kind not met yet is built whole; a touched, unchanged source comes down as it is met),
the others one more that was not (none expected until one is found).  A first build, a
clean rebuild and an edit of sources alone are so counted exactly from the first update;
a header edit converges as its objects are met.  Units the walk could not look into,
and every unit when the prior fails, are counted as known out of date (the estimate of
before the prior).  The commands still expected are those units times the commands per
unit of their kind (an object takes one, a static library two: ar and ranlib): the
last build's of the same targets (the history keeps each kind's units and commands with
the build's shape), else this build's so far, else the last build's over all kinds (a
history written before kinds were kept), else this build's over all kinds, else 1; the
pool counts the commands submitted, and the history gives their durations
(engine/src/progress/build_progress.h); the targets of the units known out of date go
to it too, so that the history's durations of the commands that wrote those files last
predict the commands to come, not only their number.  A unit's commands are those its task ran (the
plugin counts them per thread while the task executes); a unit made ready is in neither
count until the pool has its commands (at most the -j units between the two).  At the
end, N = M = what ran, and the units built go into the history with the build's shape,
with each kind's units and commands (a kind not built this time keeps the last build's
figures): given to the status once, by `finish()` from the plugin's exit handler (after
Ctrl-C and a failed build too), not at each update.

Hooks (feature-detected by the plugin: SCons.Script.Main.BuildTask's make_ready and
executed, in every SCons 4.x; execute where it has one): make_ready and executed run in
the thread that holds the Taskmaster (the main thread; NewParallel's workers under its
lock), execute in the thread that runs the task's commands; a lock of ours guards the
count all the same. Without a status line the first task made ready puts the stock
methods back.
"""

import os
import threading
from stat import S_ISREG as _S_ISREG

__all__ = ['install', 'finish', 'units_to_build', 'task_commands']


class _TaskCommands(threading.local):
    """The commands the task executing in this thread has run so far: the plugin adds one
    per command it runs (`task_commands.ran += 1`: no call, no lock on that path)."""
    ran = 0


task_commands = _TaskCommands()
_count = None           # the _Count install() made
_hooks = []             # (class, name, stock method, hook) install() put in place


def install(build_task, session_for):
    """Follow `build_task`'s make_ready, execute and executed; `session_for()` gives the
    session whose status line shows the count, or None (no status line: the first task
    made ready finds that out and puts the stock methods back)."""
    global _count
    count = _count = _Count(session_for)
    _after(build_task, 'make_ready', count.evaluated)
    _after(build_task, 'executed', count.executed)
    if callable(getattr(build_task, 'execute', None)):
        _around_execute(build_task)


def finish():
    """The build is over: give the status what the history keeps of the count (before the
    status finishes: the plugin's exit handler, also after Ctrl-C or a failed build)."""
    try:
        if _count is not None:
            _count.finish()
    except Exception:       # the count must never break the build
        pass


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
    _hook(build_task, 'execute', execute, stock)


def units_to_build(top, graph=None):
    """The executors of the File nodes with a builder under the nodes `top`: through
    their explicit children, the libraries a program links (LIBS) and a directory's
    entries, the two kinds of children SCons finds only by scanning.  `graph` (a
    _Graph), when given, learns each unit's target nodes and what they depend on, and
    which File nodes it met have no builder (the sources, for known_out_of_date)."""
    # The driver's thread runs this once per build, over every node under the targets:
    # per node as few Python calls as will do (a source's explicit children are read
    # only when it has some; the builder's target scanner looked up once per builder).
    units, seen, stack = set(), set(), list(top)
    pop, push, mark = stack.pop, stack.extend, seen.add
    scanners = {}               # id(builder) -> its ProgramScanner, or None
    unit_of = inputs_of = sources = None
    if graph is not None:
        unit_of, inputs_of, sources = graph.unit_of, graph.inputs, graph.sources
    while stack:
        node = pop()
        key = id(node)
        if key in seen:
            continue
        mark(key)
        try:
            kind = node.__class__.__name__
            if kind in _FILE_KINDS:
                if node.has_builder():
                    executor = node.get_executor()
                    units.add(executor)
                    builder = node.builder
                    scanner = scanners.get(id(builder), _UNSET)
                    if scanner is _UNSET:
                        scanner = scanners[id(builder)] = _program_scanner(builder)
                    libraries = _libraries(node, scanner) if scanner is not None else ()
                    push(libraries)
                    children = node.children(scan=0)
                    push(children)
                    if unit_of is not None:
                        unit_of[node] = executor
                        inputs = inputs_of.get(executor)
                        if inputs is None:
                            inputs = inputs_of[executor] = []
                        inputs.extend(children)
                        inputs.extend(libraries)
                    continue
                if sources is not None:
                    sources[node] = True
                # Node's explicit children are these three lists (SCons 4.x): a source
                # has none, mostly; children() is asked only when it has some.
                if not (getattr(node, 'sources', True) or getattr(node, 'depends', True)
                        or getattr(node, 'implicit', True)):
                    continue
            elif kind == 'Dir':
                push(_entries(node))
            push(node.children(scan=0))
        except Exception:       # a node of a kind we do not know: not counted
            pass
    return units


_FILE_KINDS = ('File', 'Entry')
_UNSET = object()


def _entries(directory):
    """What building a directory builds: the nodes SCons knows in it (its DirEntryScanner
    lists them, from Dir.entries, in every SCons 4.x); '.' and '..' are itself and its
    parent."""
    entries = getattr(directory, 'entries', None)
    if not isinstance(entries, dict):
        return ()
    return [node for name, node in entries.items() if name not in ('.', '..')]


def _program_scanner(builder):
    """`builder`'s target scanner when it is SCons' ProgramScanner (the libraries a
    program, a shared library links), else None."""
    scanner = getattr(builder, 'target_scanner', None)
    if scanner is None or getattr(scanner, 'name', None) != 'ProgramScanner':
        return None
    return scanner


def _libraries(node, scanner):
    """The libraries `node` (a program, a shared library) links: what `scanner`, its
    builder's ProgramScanner, finds for LIBS in LIBPATH. That scanner looks names up
    among the nodes and directories and reads no file, so running it here is cheap;
    any other target scanner is left to the build."""
    executor = node.get_executor()
    path = executor.get_build_scanner_path(scanner)
    return scanner(node, executor.get_build_env(), path) or ()


class _Graph:
    """What the walk saw of each unit for the prior (`known_out_of_date`): the nodes its
    targets depend on explicitly (their children without scanning, and LIBS), and the
    File nodes without a builder it met."""

    def __init__(self):
        self.unit_of = {}       # a unit's target node -> its executor
        self.inputs = {}        # executor -> [child nodes of its targets]
        self.sources = {}       # a File node the walk found without a builder -> True
        self.targets = {}       # executor -> its targets (known_out_of_date: once each)

    def add(self, node, executor, children, libraries):
        self.unit_of[node] = executor
        self.inputs.setdefault(executor, []).extend(children)
        self.inputs[executor].extend(libraries)


def known_out_of_date(units, graph, stat=os.stat):
    """The units (by _unit_key) known to be out of date before SCons looks, as make
    decides: a target is missing, or older than a source file (an input no builder
    makes) it depends on explicitly, or the unit depends on a unit known out of date;
    and {unit: [the units that depend on it]}.  Each file is stat()ed once, plainly:
    SCons' own node stat caches memoize, and the build must find what it finds.  A unit
    the walk could not look into is counted as known out of date (the estimate of
    before: built until units of its kind are found up to date).  Each unit's targets
    are asked for once, and kept in graph.targets.  Once a target is missing, its
    directory is listed (os.scandir, once) and the targets not in it are missing without
    a stat of their own: a clean tree's targets cost a stat a directory, not one each
    (a system call is some microseconds; an object's, a library's and a program's
    targets mostly share their directory)."""
    targets_of = graph.targets
    for unit in units:
        targets_of[unit] = unit.get_all_targets()
    unit_of, inputs_of, sources, mtimes = graph.unit_of, graph.inputs, graph.sources, {}
    listed = {}                 # directory -> the names in it (False: not listable)
    known, parents = set(), {}
    for unit in units:
        targets = targets_of[unit]
        key = targets[0] if targets else unit
        inputs = inputs_of.get(unit)
        if inputs is None:
            known.add(key)
            continue
        try:
            oldest, missing = None, False
            for target in targets:
                path = target.get_abspath()
                directory, _, name = path.rpartition(_SEP)
                names = listed.get(directory)
                if names and name not in names:
                    missing = True
                    break
                try:
                    t = stat(path).st_mtime_ns
                except OSError:
                    missing = True
                    if names is None:
                        listed[directory] = _names_in(directory)
                    break
                oldest = t if oldest is None or t < oldest else oldest
            for child in inputs:
                below = unit_of.get(child)
                if below is not None:
                    below_targets = targets_of[below]
                    parents.setdefault(below_targets[0] if below_targets else below, []).append(key)
                    continue
                if missing:
                    continue
                source = sources.get(child)
                if source is None:      # not met by the walk as a File: as it is
                    source = child.__class__.__name__ in _FILE_KINDS and not child.has_builder()
                if source:
                    # A source in a variant directory: its copy there may be stale.
                    path = child.srcnode().get_abspath()
                    changed = mtimes.get(path, _UNSET)
                    if changed is _UNSET:
                        try:
                            st = stat(path)
                            changed = st.st_mtime_ns if _S_ISREG(st.st_mode) else None
                        except OSError:
                            changed = None
                        mtimes[path] = changed
                    if changed is not None and oldest is not None and changed > oldest:
                        missing = True
            if missing:
                known.add(key)
        except Exception:       # a node of a kind we do not know: as before
            known.add(key)
    # Up the graph: what depends on a unit out of date is out of date.
    stack = list(known)
    while stack:
        for parent in parents.get(stack.pop(), ()):
            if parent not in known:
                known.add(parent)
                stack.append(parent)
    return known, parents


_SEP = os.sep


def _names_in(directory):
    """The names of the entries of `directory`; False when it cannot be listed (its
    files are then stat()ed one by one, as they may still be there to stat)."""
    try:
        with os.scandir(directory or _SEP) as entries:
            return {entry.name for entry in entries}
    except OSError:
        return False


def _after(owner, name, after):
    stock = getattr(owner, name)

    def hooked(self, *args, **kwargs):
        result = stock(self, *args, **kwargs)
        try:
            after(self)
        except Exception:       # the count must never break the build
            pass
        return result
    _hook(owner, name, hooked, stock)


def _hook(owner, name, hook, stock):
    hook.__wrapped__ = stock
    setattr(owner, name, hook)
    _hooks.append((owner, name, stock, hook))


def _uninstall():
    """No status line follows this build: the stock methods back, so that its tasks do
    not pass through hooks that would only find no status (three wrapper calls and two
    of our lock's round trips per task, about 1 us). A method something else wrapped
    since is left as it is."""
    for owner, name, stock, hook in _hooks:
        if getattr(owner, name, None) is hook:
            setattr(owner, name, stock)
    del _hooks[:]


class _Count:
    def __init__(self, session_for):
        self._session_for = session_for
        self._lock = threading.Lock()
        self._begun = False
        self._status = None
        # Units are counted by kind (the suffix of their targets) and by whether they are
        # known out of date (True: the prior says so, or could not look; False: not).
        self._units = {}        # units not made ready yet -> [kind, known out of date]
        self._parents = {}      # unit -> the units that depend on it (known_out_of_date)
        self._left = {}         # (kind, known) -> how many of self._units
        self._seen = {}         # (kind, known) -> units made ready so far
        self._rebuilt = {}      # (kind, known) -> of those, how many were out of date
        self._executed = 0      # units built
        self._built = {}        # kind -> [units built, the commands they ran]
        self._last_kinds = {}   # kind -> [units, commands, out of date, made ready] in
                                # the last build of these targets (format_kinds)
        self._last_per_unit = None  # commands per unit in it, over all kinds
        self._overall = None    # this build's, over all kinds, in the update under way
        self._fixed = {}        # kind -> its commands per unit in the last build (a kind
                                # it built: what _per_unit gives it for the whole build)
        self._all_fixed = False  # every kind counted is in _fixed: a unit built changes
                                 # no expectation

    def evaluated(self, task):
        with self._lock:
            first = not self._begun
            if first:
                self._begin(task)
            if self._status is None:
                return
            # The task's targets are its executor's (Taskmaster.next_task), first target
            # first; the executor itself may be gone already (an up-to-date node's).
            targets = task.targets
            unit = self._units.pop(targets[0], None) if targets else None
            if unit is not None:
                group = (unit[0], unit[1])
                self._left[group] -= 1
                self._seen[group] = self._seen.get(group, 0) + 1
                if getattr(task, 'out_of_date', None):
                    self._rebuilt[group] = self._rebuilt.get(group, 0) + 1
                    task._spawnpool_kind = unit[0]  # a counted unit: executed() tallies it
                    if not unit[1]:
                        self._known_out_of_date_above(targets[0])
            if unit is not None or first:
                self._expect()

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
                if not self._all_fixed:     # else the expectation is the one it was
                    self._expect()

    def finish(self):
        """The build is over (also stopped, or failed): the history's account of the units
        by kind (read when the status finishes, so given once, here).  At exit a job
        thread stopped by Ctrl-C may still be in a hook: it is waited for a second."""
        locked = self._lock.acquire(timeout=1)
        try:
            if self._status is not None:
                self._status.progress.set_units_built(self._executed)
                self._status.progress.set_unit_kinds(self._kinds_text())
        finally:
            if locked:
                self._lock.release()

    def _begin(self, task):
        self._begun = True
        session = self._session_for()
        if session is None:
            _uninstall()
            return
        taskmaster = task.tm
        top = list(getattr(taskmaster, 'original_top', None) or [])
        self._status = session.status
        progress = self._status.begin(os.getcwd(), [str(node) for node in top])
        commands, units = progress.last_build()
        self._last_per_unit = commands / units if units else None
        self._last_kinds = parse_kinds(getattr(progress, 'last_build_kinds', str)())
        self._fixed = {kind: figures[1] / figures[0]
                       for kind, figures in self._last_kinds.items() if figures[0]}
        graph = _Graph()
        units = units_to_build(top, graph)
        try:
            known, self._parents = known_out_of_date(units, graph)
        except Exception:       # never the build's problem: every unit as before
            known, self._parents = None, {}
        targets_of, left = graph.targets, self._left
        outputs = []            # the files of the units known out of date
        for unit in units:
            targets = targets_of.get(unit)
            if targets is None:
                targets = unit.get_all_targets()
            key = targets[0] if targets else unit
            group = (_kind_of(targets), known is None or key in known)
            self._units[key] = list(group)
            left[group] = left.get(group, 0) + 1
            if known is not None and group[1]:
                outputs.extend(targets)
        self._all_fixed = all(kind in self._fixed for kind, _ in left)
        try:
            progress.expect_outputs([target.get_abspath() for target in outputs])
        except Exception:       # never the build's problem: the count alone then
            pass

    def _known_out_of_date_above(self, key):
        """The unit `key`, not known out of date, was: so are the units above it not made
        ready yet (SCons makes a unit ready after the units under it)."""
        stack = list(self._parents.get(key, ()))
        while stack:
            above = stack.pop()
            unit = self._units.get(above)
            if unit is None or unit[1]:
                continue        # made ready already, or known (and so are those above it)
            self._left[(unit[0], False)] -= 1
            unit[1] = True
            self._left[(unit[0], True)] = self._left.get((unit[0], True), 0) + 1
            stack.extend(self._parents.get(above, ()))

    def _expect(self):
        """Tell the status the commands still expected: for each group (a kind, known
        out of date or not) its units left that will be built, as many as of those made
        ready so far were out of date, counting one more that was for those known out of
        date (so a kind not met yet is built whole, and a clean build stays whole), one
        more that was not for the others (so an edit of sources alone is counted exactly
        from the start, and a header edit, a changed command line or a content decider's
        up-to-date verdict shows as they are met); times the commands per unit of its
        kind.  Once for every unit made ready: the arithmetic inline, a kind's commands
        per unit from the last build looked up (_fixed), the others asked of
        _per_unit."""
        self._overall = None    # this build's commands per unit over all kinds, once
        fixed, rebuilt, seen = self._fixed, self._rebuilt, self._seen
        terms = []
        for group, left in self._left.items():
            if left:
                per_unit = fixed.get(group[0])
                if per_unit is None:
                    per_unit = self._per_unit(group[0])
                terms.append(left * (rebuilt.get(group, 0) + (1 if group[1] else 0))
                             / (seen.get(group, 0) + 1) * per_unit)
        self._status.expect(round(sum(terms)))

    def _per_unit(self, kind):
        """Commands per unit of `kind`: the last build's of these targets, else this
        build's so far, else the last build's over all kinds, else this build's, else 1."""
        for units, commands, *_ in (self._last_kinds.get(kind, _NONE), self._built.get(kind, _NONE)):
            if units:
                return commands / units
        if self._last_per_unit is not None:
            return self._last_per_unit
        if not self._executed:
            return 1.0
        # A view (the ETA's arithmetic, under the progress's lock) at most once an update,
        # not once for each kind: in a first build every update needs it.
        if self._overall is None:
            self._overall = self._status.view()['done'] / self._executed
        return self._overall

    def _kinds_text(self):
        """Each kind's units built and their commands for the history (this build's, else
        the last build's: a kind not built this time keeps them), with how many of the
        kind this build found out of date of those made ready."""
        rebuilt, seen = {}, {}
        for (kind, _), n in self._rebuilt.items():
            rebuilt[kind] = rebuilt.get(kind, 0) + n
        for (kind, _), n in self._seen.items():
            seen[kind] = seen.get(kind, 0) + n
        kinds = {}
        for kind in set(self._last_kinds) | set(self._built) | set(seen):
            units, commands = (self._built.get(kind) or self._last_kinds.get(kind, _NONE))[:2]
            kinds[kind] = [units, commands, rebuilt.get(kind, 0), seen.get(kind, 0)]
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


def _kind_of(targets):
    """The suffix of the first of `targets` ('' for none).  A File's name is the last
    part of its path (str() of it, which SCons builds with several calls)."""
    try:
        target = targets[0]
        name = getattr(target, 'name', None) if target.__class__.__name__ in _FILE_KINDS else None
        if name.__class__ is not str:
            name = str(target)
    except Exception:
        return ''
    base = name.rsplit('/', 1)[-1]
    return base.rsplit('.', 1)[-1] if '.' in base else ''
