"""Shared by the tests of the issue-6 options (output sync, trace, stats, direct exec):
a second SConstruct, ``SConstruct.issue6``, added to a copy of the test project, with
commands that need no shell, and its helper tool.  Run with ``-f SConstruct.issue6``."""

import json
import sys

from scons_e2e import SCONS, SITE_DIR, SYSTEM_PYTHON

SCONSTRUCT = r'''
# Targets for the issue-6 options. None of the 'py tool.py' actions has shell syntax,
# so with direct exec they run without sh.
import os
env = Environment(ENV={'PATH': os.environ['PATH']}, PY='%(python)s')
env.Command('parent/probe.txt', [], '$PY tool.py parent $TARGET')  # probe.txt: not compared
env.Command('out dir/argv.txt', [],
            '$PY tool.py argv $TARGET "a b" \'c$$d\' e\\ f "q\\"uote" --x=1,2:3 ""')
env.Command('escaped.txt', [], Action('$PY tool.py argv $TARGET ${ESCAPED}'),
            ESCAPED=env.Literal('lit $x "y" \\z'))
for tag in 'ABCD':
    env.Alias('chatty', env.Command('chatty%%s.txt' %% tag, [],
                                    '$PY tool.py chatty $TARGET %%s 15' %% tag))
env.Alias('notfound', env.Command('notfound.txt', [], 'no_such_tool_for_issue6 $TARGET'))
env.Alias('segv', env.Command('segv.txt', [], '$PY tool.py signal $TARGET 11'))
env.Alias('exit4', env.Command('exit4.txt', [], '$PY tool.py exit $TARGET 4'))
env.Alias('shelly', env.Command('shelly.txt', [], 'echo via sh > $TARGET'))
Default('parent/probe.txt', 'out dir/argv.txt', 'escaped.txt', 'shelly')
''' % {'python': SYSTEM_PYTHON}

TOOL = r'''
import json, os, signal, sys, time
mode, target = sys.argv[1], sys.argv[2]
if mode == 'parent':
    with open('/proc/%d/comm' % os.getppid()) as f:
        text = f.read()
elif mode == 'argv':
    text = json.dumps({'argv': sys.argv[3:],
                       'PWD is the cwd': os.environ.get('PWD') == os.getcwd()})
elif mode == 'chatty':
    tag, n = sys.argv[3], int(sys.argv[4])
    for i in range(n):
        os.write(1, b'%s out %d\n' % (tag.encode(), i))
        os.write(2, b'%s err %d\n' % (tag.encode(), i))
        time.sleep(0.003)
    text = tag
elif mode == 'signal':
    os.kill(os.getpid(), int(sys.argv[3]))
elif mode == 'exit':
    print('exiting with', sys.argv[3])
    sys.exit(int(sys.argv[3]))
with open(target, 'w') as f:
    f.write(text)
'''


def add_issue6_files(project):
    (project.root / 'SConstruct.issue6').write_text(SCONSTRUCT)
    (project.root / 'tool.py').write_text(TOOL)
    return project


def issue6_argv(args, pool=True):
    """argv for `scons -f SConstruct.issue6 ...`, with or without the plugin."""
    head = [SCONS, '-f', 'SConstruct.issue6']
    if pool:
        head += ['--site-dir=%s' % SITE_DIR, '--process-spawner']
    return head + list(args)


def trace_events(path):
    """The command events of a trace file, which must be valid JSON."""
    data = json.loads(path.read_text())
    return [e for e in data['traceEvents'] if e.get('cat') == 'command']


def test_issue6_options_are_listed(pool_module, project):
    add_issue6_files(project)
    r = project.scons(argv=issue6_argv(['-h']), env=project.env(True))
    assert r.returncode == 0, r
    for option in ('--process-spawner-output=MODE', '--process-spawner-trace=FILE',
                   '--process-spawner-stats', '--process-spawner-direct-exec'):
        assert option in r.stdout, r


if __name__ == '__main__':
    sys.exit('run with pytest')
