"""scons --process-spawner-memory: the same build as stock, the history in .spawnpool/ at
the top of the build (or where --process-spawner-history says), no cgroup left behind,
the statistics' memory lines, and the OOM killer's message when a command never fits."""

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from scons_e2e import BUILD, SCONS, SITE_DIR, assert_same_console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'support'))
import cgroup_support  # noqa: E402  (tests/support: memory cgroups of the test's own)

MEMORY = '--process-spawner-memory=auto'
HISTORY = Path('.spawnpool') / 'memory-history.sqlite'
# Where this machine has no writable cgroups the pool says so once; the build is the same.
NO_CGROUPS = 'scons: warning: --process-spawner-memory: no per-slot memory cgroups'


def without_history(project):
    return {name: data for name, data in project.outputs().items()
            if not name.startswith('.spawnpool' + os.sep)}


def history_rows(path):
    """Rows in all of the history's tables."""
    assert path.is_file(), 'no history at %s' % path
    with sqlite3.connect(str(path)) as db:
        tables = [name for (name,) in
                  db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return sum(db.execute('SELECT count(*) FROM "%s"' % name).fetchone()[0]
                   for name in tables)


def strip_cgroup_notice(run):
    run.stderr = ''.join(line for line in run.stderr.splitlines(True)
                         if not line.startswith(NO_CGROUPS))
    return run


@pytest.fixture
def no_cgroup_left():
    # Leaked: its driver is gone. A cgroup of a live driver may be another test session's
    # pool running meanwhile (the compat matrix runs two cells at once).
    before = cgroup_support.pool_cgroups()
    yield
    left = cgroup_support.leaked_pool_cgroups() - before
    assert not left, 'cgroups left behind: %s' % sorted(left)


def test_memory_auto_builds_as_stock(pool_module, projects, no_cgroup_left):
    stock, pool = projects
    rs = stock.scons('-j4')
    rp = strip_cgroup_notice(pool.scons('-j4', MEMORY, pool=True))
    assert rs.returncode == 0, rs
    assert_same_console(rs, rp, ordered=False)
    assert without_history(pool) == stock.outputs()
    assert history_rows(pool.root / HISTORY) > 0, 'no history written'

    # From clean again, warm: the statistics show what admission did.
    pool.scons('-c', pool=True)
    rp2 = strip_cgroup_notice(pool.scons('-j4', MEMORY, '--process-spawner-stats', pool=True))
    assert rp2.returncode == 0, rp2
    assert 'delayed for memory:' in rp2.stdout and 'OOM retries:' in rp2.stdout, rp2
    assert 'prediction error:   p50' in rp2.stdout, rp2
    assert without_history(pool) == stock.outputs()


def test_history_option_moves_it(pool_module, project, no_cgroup_left):
    r = project.scons('-Q', MEMORY, '--process-spawner-history=state/history.db', pool=True)
    assert r.returncode == 0, r
    assert (project.root / 'state' / 'history.db').is_file()
    assert not (project.root / '.spawnpool').exists()


def test_history_without_memory_is_ignored_with_a_warning(pool_module, project):
    r = project.scons('-Q', '--process-spawner-history=h.db', pool=True)
    assert r.returncode == 0, r
    assert ('scons: warning: --process-spawner-history: only used with '
            '--process-spawner-memory or --process-spawner-status; ignored') in r.stderr, r
    assert not (project.root / 'h.db').exists()


def test_a_command_that_never_fits_fails_with_the_oom_message(pool_module, project,
                                                              no_cgroup_left):
    alloc = BUILD / 'tests' / 'helpers' / 'alloc_touch'
    if not alloc.exists():
        pytest.skip('%s is not built' % alloc)
    with cgroup_support.TestCgroup(limit_bytes=192 << 20, holds_driver=True) as cap:
        # SCons itself runs in the capped cgroup, as under the memory benchmark.
        argv = ['/bin/sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cap.path,
                SCONS, '--site-dir=%s' % SITE_DIR, '--process-spawner', MEMORY, '-Q',
                'oom', 'alloc=%s' % alloc, 'mib=400']
        r = strip_cgroup_notice(project.scons(argv=argv, env=project.env(pool=True)))
    assert r.returncode == 2, r
    assert ("scons: *** --process-spawner: killed by the kernel's OOM killer (peak "
            in r.stderr), r
    assert 'scons: *** [oom.txt] Error' in r.stderr, r
    assert not (project.root / 'oom.txt').exists()
