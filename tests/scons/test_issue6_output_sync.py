"""--process-spawner-output=sync: each command's output is one block, never interleaved;
merged in write order when SCons' stdout and stderr are the same file."""

import subprocess

import pytest

from scons_e2e import TIMEOUT, assert_same_console, assert_same_outputs, kill_session
from test_issue6_common import add_issue6_files, issue6_argv

SYNC = '--process-spawner-output=sync'
TAGS = 'ABCD'


def blocks(lines):
    """Tags in order of appearance, runs collapsed: one entry per contiguous block."""
    order = []
    for line in lines:
        tag = line.split()[0]
        if not order or order[-1] != tag:
            order.append(tag)
    return order


def chatty_lines(text):
    return [l for l in text.splitlines() if l[:1] in TAGS and l[1:2] == ' ']


def test_separate_streams(pool_module, project):
    add_issue6_files(project)
    r = project.scons(argv=issue6_argv(['-Q', '-j4', SYNC, 'chatty']), env=project.env(True))
    assert r.returncode == 0, r
    out, err = chatty_lines(r.stdout), chatty_lines(r.stderr)
    assert sorted(blocks(out)) == list(TAGS), r.stdout
    assert sorted(blocks(err)) == list(TAGS), r.stderr
    assert len(out) == len(err) == 4 * 15


def test_without_sync_commands_interleave(pool_module, project):
    """The control: passthrough (the default) shows the same commands interleaved."""
    add_issue6_files(project)
    r = project.scons(argv=issue6_argv(['-Q', '-j4', 'chatty']), env=project.env(True))
    assert r.returncode == 0, r
    assert len(blocks(chatty_lines(r.stdout))) > 4, r.stdout


def test_same_file_keeps_write_order(pool_module, project):
    add_issue6_files(project)
    proc = subprocess.Popen(issue6_argv(['-Q', '-j4', SYNC, 'chatty']), cwd=project.root,
                            env=project.env(True), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        kill_session(proc.pid)
    assert proc.returncode == 0, out
    lines = chatty_lines(out.decode())
    assert sorted(blocks(lines)) == list(TAGS), out
    for tag in TAGS:
        mine = [l for l in lines if l.startswith(tag + ' ')]
        assert mine == [l for i in range(15) for l in ('%s out %d' % (tag, i),
                                                         '%s err %d' % (tag, i))]


@pytest.mark.parametrize('target', [[], ['-k', 'broken', 'missing', 'exit3', 'main']])
def test_j1_console_is_stock(pool_module, projects, target):
    """With one job a block comes out where the passthrough output would have."""
    stock, pool = projects
    rs = stock.scons('-Q', '-j1', *target)
    rp = pool.scons('-Q', '-j1', SYNC, *target, pool=True)
    assert_same_console(rs, rp)
    assert_same_outputs(stock, pool)
