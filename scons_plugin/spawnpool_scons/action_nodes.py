"""The targets and inputs of the SCons action whose command is running, for the trace.

The build report draws the build's critical path from them (which command made what the
next one read); the spawn functions SCons calls know only the command line.  `install()`
wraps ``SCons.Action.CommandAction.execute(self, target, source, env, executor=None)``
(the same from SCons 4.0 to 4.10; LazyAction and generators run it too) to note its nodes
in a thread-local while its commands run; `current()` turns them into the trace's args.
Found by feature: an SCons without that method gets traces without dependencies.

Threading: SCons runs actions in its job threads (the main thread under -j1); each
thread sees only its own action.
"""

import importlib
import threading

__all__ = ['install', 'current']

_running = threading.local()        # .nodes: (targets, sources) of this thread's action


def install(mark):
    """Wrap CommandAction.execute once (`mark`: the attribute that says it is done, shared
    by every copy of the plugin).  False when this SCons has no such method."""
    try:
        action = importlib.import_module('SCons.Action').CommandAction
    except (ImportError, AttributeError):
        return False
    stock = getattr(action, 'execute', None)
    if not callable(stock):
        return False
    if getattr(action, mark, False):
        return True
    setattr(action, mark, True)

    def execute(self, target, source, env, *args, **kw):
        _running.nodes = (target, source)
        try:
            return stock(self, target, source, env, *args, **kw)
        finally:
            _running.nodes = None
    execute.__wrapped__ = stock
    action.execute = execute
    return True


def current():
    """{'targets': [...], 'inputs': [...]} of this thread's running action, as SCons
    names the nodes (paths from the top of the build), or None outside an action.
    Inputs are the targets' children: sources, explicit and scanned dependencies."""
    nodes = getattr(_running, 'nodes', None)
    if nodes is None:
        return None
    targets, sources = nodes
    inputs, seen = [], set()
    for target in targets:
        children = getattr(target, 'children', None)
        for child in children(scan=0) if children is not None else sources:
            name = str(child)
            if name not in seen:
                seen.add(name)
                inputs.append(name)
    return {'targets': [str(t) for t in targets], 'inputs': inputs}
