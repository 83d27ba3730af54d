"""The status line's count of what SCons will build (issue 18 item 3).

SCons knows no total (SCons issue #2608).  When the build's first task is made ready,
the nodes under the Taskmaster's top targets are walked through their explicit children
(no scanning: that is the build's own work, done later and cached), and each File node
with a builder counts as one unit of work (an executor: the targets of one builder call
count once; an Entry not yet known as a File counts too).  Each unit leaves the count when the Taskmaster makes its task ready: found
up to date, or about to be built.  The commands still expected are the units left times
the commands per unit built: the last build's of the same targets (the history), else
this build's so far, else 1; the pool counts the commands submitted, and the history
gives their durations (engine/src/progress/build_progress.h).  At the end, N = M = what
ran, and the units built go into the history with the build's shape.

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
    """The executors of the File nodes with a builder under the nodes `top`."""
    units, seen, stack = set(), set(), list(top)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        try:
            if node.__class__.__name__ in ('File', 'Entry') and node.has_builder():
                units.add(node.get_executor())
            stack.extend(node.children(scan=0))
        except Exception:       # a node of a kind we do not know: not counted
            pass
    return units


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
        self._units = set()     # units not made ready yet
        self._executed = 0      # units built
        self._last_per_unit = None  # commands per unit in the last build of these targets

    def evaluated(self, task):
        with self._lock:
            if not self._begun:
                self._begin(task)
            if self._status is None:
                return
            for target in task.targets:
                if target.has_builder():
                    self._units.discard(target.get_executor())
                    break
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
        self._units = units_to_build(top)

    def _update(self):
        if self._last_per_unit is not None:
            per_unit = self._last_per_unit
        else:
            done = self._status.view()['done']
            per_unit = done / self._executed if self._executed else 1.0
        self._status.expect(round(len(self._units) * per_unit))
        self._status.progress.set_units_built(self._executed)
