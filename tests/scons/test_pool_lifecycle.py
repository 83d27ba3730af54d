"""One pool per SCons process: its size follows -j, it leaves nothing behind, and when it
cannot start the build goes on with stock spawning after one warning."""

import re

import pytest

from scons_e2e import (PLUGIN_DIR, assert_same_console, assert_same_outputs, shm_left_over,
                       shm_objects, wait_session_empty)

STARTED = re.compile(r'^scons: spawnpool: pool started with (\d+) slots$', re.M)


def debug_env(project, **extra):
    return project.env(pool=True, SPAWNPOOL_SCONS_DEBUG='1', **extra)


@pytest.mark.parametrize('jobs, slots', [('-j1', 1), ('-j4', 4), (None, 1)])
def test_slots_follow_jobs(pool_module, project, jobs, slots):
    args = ['-Q'] + ([jobs] if jobs else [])
    r = project.scons(*args, pool=True, env=debug_env(project))
    assert r.returncode == 0, r
    assert STARTED.findall(r.stderr) == [str(slots)], r


def test_setoption_num_jobs_after_configure_resizes(pool_module, project):
    # The Configure checks start the pool with the command line's 1 slot; the SConstruct
    # then calls SetOption('num_jobs', 3): the build runs on a 3-slot pool.
    r = project.scons('-Q', 'setjobs=3', pool=True, env=debug_env(project))
    assert r.returncode == 0, r
    assert STARTED.findall(r.stderr) == ['1', '3'], r


def test_command_line_jobs_win_over_setoption(pool_module, project):
    r = project.scons('-Q', '-j2', 'setjobs=3', pool=True, env=debug_env(project))
    assert r.returncode == 0, r
    assert STARTED.findall(r.stderr) == ['2'], r


def test_nothing_left_behind_j2(pool_module, project):
    shm_before = shm_objects()
    # check_leaks (default): no process of scons' session (spawners, commands) survives.
    r = project.scons('-j2', '--config=force', pool=True)
    assert r.returncode == 0, r
    assert wait_session_empty(project.last_sid) == []
    left = shm_left_over(shm_before)
    assert not left, 'shared-memory objects left in /dev/shm: %s' % sorted(left)


def test_nothing_left_behind_after_failure(pool_module, project):
    shm_before = shm_objects()
    r = project.scons('-Q', '-j2', '-k', 'broken', 'missing', 'killed', 'main', pool=True)
    assert r.returncode == 2, r
    left = shm_left_over(shm_before)
    assert not left, 'shared-memory objects left in /dev/shm: %s' % sorted(left)


STUB_POOL_FAILS = '''
class SpawnError(OSError):
    pass
class SpawnerDied(SpawnError):
    pass
class Pool:
    def __init__(self, slots):
        raise OSError(24, 'stub: cannot start spawners')
'''


@pytest.mark.parametrize('problem', ['pool-fails', 'not-installed'])
def test_pool_that_cannot_start_falls_back_to_stock(projects, tmp_path, problem):
    """One warning, then exactly the stock build (needs no real spawnpool module)."""
    stock, pool = projects
    pythonpath = [PLUGIN_DIR]
    if problem == 'pool-fails':
        stub = tmp_path / 'stub' / 'spawnpool'
        stub.mkdir(parents=True)
        (stub / '__init__.py').write_text(STUB_POOL_FAILS)
        pythonpath.insert(0, stub.parent)
    rs = stock.scons('-j2', '--config=force')
    rp = pool.scons('-j2', '--config=force', pool=True,
                    env=pool.env(pool=True, pythonpath=pythonpath))
    warnings = [l for l in rp.stderr.splitlines() if 'warning' in l]
    assert len(warnings) == 1, rp
    assert warnings[0].startswith('scons: warning: --process-spawner: could not start the '
                                  'process pool ('), rp
    assert warnings[0].endswith('); using the default spawner.'), rp
    if problem == 'pool-fails':
        assert 'stub: cannot start spawners' in warnings[0]
    else:
        assert 'spawnpool' in warnings[0]
    rp.stderr = rp.stderr.replace(warnings[0] + '\n', '', 1)
    assert_same_console(rs, rp, ordered=False)
    assert_same_outputs(stock, pool)
    assert pool.config_log() == stock.config_log()
