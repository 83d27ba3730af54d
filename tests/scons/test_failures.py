"""Failing, missing and signal-killed commands: same messages and exit codes as stock."""

import pytest

from scons_e2e import assert_same_console, assert_same_outputs

CASES = {
    # compile error: gcc's diagnostics on stderr, "Error 1"
    'compile': ['broken'],
    # command not found: "sh: 1: ...: not found", "Error 127"
    'missing-tool': ['missing'],
    # the shell kills itself with SIGKILL: "Error -9"
    'signal': ['killed'],
    # output on both streams, then exit 3
    'exit-status': ['exit3'],
    # the shell itself cannot be exec'd (stock: Popen raises FileNotFoundError)
    'no-shell': ['noshell'],
    # one argument over exec's 128 KiB limit (stock: Popen raises E2BIG)
    'too-long': ['toolong'],
    # all of them, keep going
    'keep-going': ['-k', 'broken', 'missing', 'killed', 'exit3', 'noshell', 'toolong', 'main'],
}
RUNS = [(case, '-j1') for case in sorted(CASES)] + [('keep-going', '-j4')]


@pytest.mark.parametrize('case, jobs', RUNS)
def test_failure_matches_stock(pool_module, projects, case, jobs):
    stock, pool = projects
    args = ['-Q', jobs] + CASES[case]
    rs = stock.scons(*args)
    rp = pool.scons(*args, pool=True)
    assert rs.returncode == 2, rs
    assert 'Traceback' not in rp.stderr, rp
    assert_same_console(rs, rp, ordered=(jobs == '-j1'))
    assert_same_outputs(stock, pool)


def test_expected_messages(pool_module, project):
    """What the cases above must look like (so a stock change shows up clearly)."""
    r = project.scons('-Q', '-k', 'broken', 'missing', 'killed', 'exit3', 'noshell', 'toolong',
                      pool=True)
    assert r.returncode == 2, r
    err = r.stderr
    assert "scons: *** [broken/broken.o] Error 1" in err
    assert "sh: 1: no_such_tool_for_the_test: not found" in err
    assert "scons: *** [missing.txt] Error 127" in err
    assert "scons: *** [killed.txt] Error -9" in err
    assert "scons: *** [exit3.txt] Error 3" in err
    assert "scons: *** [noshell.txt] sh: No such file or directory" in err
    assert "scons: *** [toolong.txt] sh: Argument list too long" in err
    assert 'about to die\n' in r.stdout and 'out\n' in r.stdout


def test_spawner_death_is_one_clear_error(pool_module, project):
    # The command kills the spawner that runs it; the build reports that command as
    # failed (no traceback) and, with -k, carries on with a fresh spawner.
    r = project.scons('-Q', '-k', '-j1', 'kill_spawner', 'probe', pool=True)
    assert 'Traceback' not in r.stderr, r
    assert r.returncode == 2, r
    lines = [l for l in r.stderr.splitlines() if l.startswith('scons: *** ')]
    assert len(lines) == 2, r
    assert lines[0].startswith('scons: *** --process-spawner: '), r
    assert 'spawner' in lines[0][len('scons: *** --process-spawner: '):], r
    assert lines[1] == 'scons: *** [kill_spawner.txt] Error 2', r
    chain = project.read('probe.txt').split()
    assert any('spawnpool' in n for n in chain[:chain.index('scons')]), chain
