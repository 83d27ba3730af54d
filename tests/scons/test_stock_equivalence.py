"""scons --process-spawner builds the same as stock scons: files, console, config.log."""

import pytest

from scons_e2e import assert_same_console, assert_same_outputs


def ancestors(project, record='probe.txt'):
    """The probe target's record: names of the shell's ancestors, parent first."""
    return project.read(record).split()


def assert_pool_ran_it(project, record='probe.txt'):
    chain = ancestors(project, record)
    assert 'scons' in chain, chain
    before_scons = chain[:chain.index('scons')]
    assert any('spawnpool' in name for name in before_scons), (
        'the shell was not started by a spawnpool spawner: %s' % chain)


@pytest.mark.parametrize('jobs', ['-j1', '-j4'])
def test_full_build_matches_stock(pool_module, projects, jobs):
    stock, pool = projects
    # --config=force: Configure really runs every check (through PSPAWN) in both.
    rs = stock.scons(jobs, '--config=force')
    rp = pool.scons(jobs, '--config=force', pool=True)
    assert rs.returncode == 0, rs
    assert_same_console(rs, rp, ordered=(jobs == '-j1'))
    assert_same_outputs(stock, pool)
    assert rp.stdout.count('os.chdir(') == 4, rp     # the two chdir=1 actions ran
    assert pool.read('gen/WORDS.txt') == 'ALPHA BETA\nGAMMA DELTA\ngen\n'
    # Configure's PSPAWN output (including the compiler's error for the missing header)
    # lands in config.log exactly as with stock Popen(stdout=log, stderr=log).
    log = pool.config_log()
    assert log == stock.config_log()
    assert 'no_such_header_for_the_test.h: No such file or directory' in log

    # A second run is a no-op in both, with the cached Configure results.
    rs2, rp2 = stock.scons(jobs), pool.scons(jobs, pool=True)
    assert_same_console(rs2, rp2)
    assert "is up to date" in rp2.stdout
    assert pool.config_log() == stock.config_log()


def test_commands_run_in_the_pool(pool_module, project):
    r = project.scons('-Q', 'probe', pool=True)
    assert r.returncode == 0, r
    assert_pool_ran_it(project)


def test_without_the_option_nothing_changes(pool_module, projects):
    stock, plugged = projects
    # The plugin is loaded (site dir) but --process-spawner is not given.
    argv = plugged.argv(['-Q', 'probe', 'main'], pool=True)
    argv.remove('--process-spawner')
    rs = stock.scons('-Q', 'probe', 'main')
    rp = plugged.scons(argv=argv, env=plugged.env(pool=True, SPAWNPOOL_SCONS_DEBUG='1'))
    assert_same_console(rs, rp)
    assert ancestors(plugged)[0] == 'scons'
    assert_same_outputs(stock, plugged)


def test_sconsflags_enable_it(pool_module, project):
    argv = project.argv(['-Q', 'probe'], pool=True)
    argv.remove('--process-spawner')
    r = project.scons(argv=argv, env=project.env(pool=True, SCONSFLAGS='--process-spawner'))
    assert r.returncode == 0, r
    assert_pool_ran_it(project)



def test_a_users_own_spawn_is_respected(pool_module, project):
    r = project.scons('-Q', 'custom', pool=True)
    assert r.returncode == 0, r
    assert project.read('custom_spawn.log').startswith('p=$PPID; while')
    # It delegated to SCons' stock posix spawn function, which the plugin routes.
    assert_pool_ran_it(project, 'custom.txt')
