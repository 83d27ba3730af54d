"""--process-spawner-direct-exec (on by default): commands without shell syntax run
without sh, and the build is the same as stock: files, console, exit status."""

import json

import pytest

from scons_e2e import assert_same_console, assert_same_outputs
from test_issue6_common import add_issue6_files, issue6_argv

OFF = '--process-spawner-direct-exec=no'


def parent(project):
    return project.read('parent/probe.txt').strip()


@pytest.mark.parametrize('mode', ['default', 'yes', 'no'])
def test_which_commands_skip_the_shell(pool_module, projects, mode):
    stock, pool = (add_issue6_files(p) for p in projects)
    extra = [] if mode == 'default' else ['--process-spawner-direct-exec=%s' % mode]
    rs = stock.scons(argv=issue6_argv(['-Q'], pool=False), env=stock.env(False))
    rp = pool.scons(argv=issue6_argv(['-Q'] + extra), env=pool.env(True))
    assert rs.returncode == 0, rs
    assert_same_console(rs, rp)
    assert_same_outputs(stock, pool)
    assert parent(stock) == 'sh'
    if mode == 'no':
        assert parent(pool) == 'sh'
    else:
        assert parent(pool).startswith('spawnpool'), parent(pool)   # no sh in between
    # The quoting SCons produced was undone as sh would: same argv, same PWD.
    argv = json.loads(pool.read('out dir/argv.txt'))
    assert argv['argv'] == ['a b', 'c$d', 'e f', 'q"uote', '--x=1,2:3', '']
    assert argv['PWD is the cwd'], argv       # sh exports PWD; so does direct exec
    assert json.loads(pool.read('escaped.txt'))['argv'] == ['lit $x "y" \\z']
    assert pool.read('shelly.txt') == 'via sh\n'


@pytest.mark.parametrize('jobs', ['-j1', '-j3'])
def test_failures_match_stock(pool_module, projects, jobs):
    """Not found (sh's message, 127), a signal (sh's "Segmentation fault", 139), exit 4."""
    stock, pool = (add_issue6_files(p) for p in projects)
    args = ['-Q', '-k', jobs, 'notfound', 'segv', 'exit4', 'parent/probe.txt']
    rs = stock.scons(argv=issue6_argv(args, pool=False), env=stock.env(False))
    rp = pool.scons(argv=issue6_argv(args), env=pool.env(True))
    assert rs.returncode == 2, rs
    assert_same_console(rs, rp, ordered=(jobs == '-j1'))
    assert_same_outputs(stock, pool)
    for text in ('sh: 1: no_such_tool_for_issue6: not found',
                 'scons: *** [notfound.txt] Error 127', 'Segmentation fault',
                 'scons: *** [segv.txt] Error 139', 'scons: *** [exit4.txt] Error 4'):
        assert text in rp.stderr, rp


@pytest.mark.parametrize('direct', ['yes', 'no'])
def test_project_build_matches_stock(pool_module, projects, direct):
    stock, pool = projects
    rs = stock.scons('-j1', '--config=force')
    rp = pool.scons('-j1', '--config=force', '--process-spawner-direct-exec=%s' % direct,
                    pool=True)
    assert rs.returncode == 0, rs
    assert_same_console(rs, rp)
    assert_same_outputs(stock, pool)
    assert pool.config_log() == stock.config_log()
