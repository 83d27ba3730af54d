"""``scons --process-spawner --process-spawner-report=FILE``: the build writes its report at
the end, and the page, in headless Chromium (report_browser.py), shows every command the
build ran as one bar, the totals, the build's command line, and a critical path drawn
through the dependencies the plugin recorded (each action's targets and inputs).

The first test builds a generated tree (bench_projects/genscons.py, the 'small' preset)
and keeps its screenshot as build/report-screenshots/scons-build.png: docs/img/
build-report.png is that picture. Skipped, with the reason, where Chromium, SCons or the
built module is missing.

    PYTHONPATH=build/python:scons_plugin /usr/bin/python3 -m pytest tests/report
"""

import json
import os
import re
import subprocess
import sys

import pytest

from report_browser import REPO, load, needs_chromium

sys.path.insert(0, str(REPO / 'tests' / 'scons'))
from scons_e2e import (MODULE_DIR, PLUGIN_DIR, SCONS, SITE_DIR, SYSTEM_PYTHON,  # noqa: E402
                       Project, base_env, describe_pids, kill_session, module_problem,
                       run_session, shm_objects, wait_session_empty)

pytestmark = [
    needs_chromium,
    pytest.mark.skipif(not os.access(SCONS, os.X_OK), reason='no scons at %s' % SCONS),
]


@pytest.fixture(autouse=True)
def pool_module():
    skip, failure = module_problem()
    if skip:
        pytest.skip(skip)
    if failure:
        pytest.fail(failure)


def scons(root, *args):
    """Run scons --process-spawner in `root`; fail on a process or /dev/shm object left."""
    shm_before = shm_objects()
    (root.parent / 'tmp').mkdir(exist_ok=True)
    # The plugin where an installed one is (~/.scons/site_scons, which every SCons reads),
    # so the report's command line is what a user types, with no path of this checkout.
    home = root.parent / 'home'
    (home / '.scons').mkdir(parents=True, exist_ok=True)
    if not (home / '.scons' / 'site_scons').exists():
        (home / '.scons' / 'site_scons').symlink_to(SITE_DIR)
    env = base_env(HOME=str(home), TMPDIR=str(root.parent / 'tmp'),
                   PYTHONPATH=os.pathsep.join(map(str, (MODULE_DIR, PLUGIN_DIR))))
    argv = [SCONS, '--process-spawner'] + list(args)
    rc, out, err, sid = run_session(argv, root, env)
    left = wait_session_empty(sid)
    if left:
        info = describe_pids(left)
        kill_session(sid)
        pytest.fail('processes left behind by scons %s:\n%s' % (' '.join(args), info))
    assert shm_objects() <= shm_before, 'shared memory left: %s' % (shm_objects() - shm_before)
    return rc, out.decode(errors='replace'), err.decode(errors='replace')


def commands_echoed(stdout):
    """The command lines SCons printed (everything but its own 'scons: ' messages)."""
    return [line for line in stdout.splitlines() if line and not line.startswith('scons: ')]


def test_the_report_of_a_generated_tree(tmp_path):
    tree = tmp_path / 'tree'
    generated = subprocess.run([SYSTEM_PYTHON, str(REPO / 'bench_projects' / 'genscons.py'),
                                '--preset', 'small', '--out', str(tree), '--json'],
                               check=True, stdout=subprocess.PIPE, timeout=120)
    expected = json.loads(generated.stdout)['counts']['scons_commands']
    rc, out, err = scons(tree, '-j2', '--process-spawner-report=report.html')
    assert rc == 0, (out, err)
    echoed = commands_echoed(out)
    assert len(echoed) == expected, echoed
    assert not list((tmp_path / 'tmp').iterdir())      # the temporary trace is gone

    dom = load(tmp_path, tree / 'report.html', 'scons-build', height=2600)
    bars = dom.bars()
    assert len(bars) == expected
    assert sorted(int(b[1]['data-index']) for b in bars) == list(range(expected))
    assert dom.card('total-commands') == str(expected)
    assert dom.card('total-failed') == '0'
    assert dom.card('wall-time').endswith(' s')
    subtitle = dom.text('subtitle')
    assert 'scons --process-spawner -j2 --process-spawner-report=report.html' in subtitle
    assert str(REPO) not in subtitle
    assert '%d commands in' % expected in subtitle
    # The dependencies came through: the chain runs compile -> archive -> ... -> link.
    assert 'through the build' in dom.text('critical-note')
    critical = [''.join(e[2]) for e in dom.by_class('critical-row')]
    # compile, ar, ranlib (one action, two commands, one after the other), link
    assert len(critical) >= 4, critical
    assert ' -c ' in critical[0] and '-o ' in critical[-1] and 'prog' in critical[-1], critical
    archive = [i for i, row in enumerate(critical) if re.sub(r'^\d+', '', row).startswith('ar ')]
    assert archive and re.sub(r'^\d+', '', critical[archive[0] + 1]).startswith('ranlib '), critical
    assert len(dom.by_class('longest-row')) == 20


def test_a_failed_build_with_its_output_and_a_trace(tmp_path):
    """-k with a compile error and a failing command, output sync and a trace: the page
    lists both failures with the output they printed, and `spawnpool report` writes the
    same page from the trace the build left."""
    project = Project(tmp_path / 'proj', tmp_path / 'home')
    rc, out, err = scons(project.root, '-Q', '-k', '-j2', '--process-spawner-output=sync',
                         '--process-spawner-trace=build.trace.json',
                         '--process-spawner-report=build.html', 'broken', 'exit3', 'main')
    assert rc == 2, (out, err)
    events = json.loads((project.root / 'build.trace.json').read_text())['traceEvents']
    ran = [e for e in events if e['ph'] == 'X']
    failed = [e for e in ran if e['args']['returncode'] != 0]
    assert len(failed) >= 2          # broken.c, exit3 (and Configure's missing header)
    assert all(isinstance(e['args'].get('targets'), list) for e in ran
               if 'conftest' not in e['args']['command'])

    dom = load(tmp_path, project.root / 'build.html', 'scons-failed-build')
    assert len(dom.bars()) == len(ran)
    assert dom.card('total-failed') == str(len(failed))
    shown = dom.text('failed')
    assert 'echo out; echo err >&2; exit 3' in shown and 'out\nerr' in shown, shown
    assert 'broken.c' in shown and 'error' in shown, shown

    again = tmp_path / 'again.html'
    done = subprocess.run([sys.executable, '-m', 'spawnpool', 'report',
                           str(project.root / 'build.trace.json'), '-o', str(again)],
                          env=dict(os.environ, PYTHONPATH=str(MODULE_DIR)),
                          stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr
    assert again.read_bytes() == (project.root / 'build.html').read_bytes()
