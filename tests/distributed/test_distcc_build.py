"""A generated tree built through distcc (a private distccd on 127.0.0.1) and the pool."""

import json
import subprocess
import time

import pytest

from dist_support import (CommandSampler, build_env, files, free_port, generate_tree,
                          run, scons_argv, verify, wait_session_empty, kill_session,
                          TIMEOUT)

LAUNCH = '--process-spawner-launcher=distcc'


@pytest.fixture
def trees(tmp_path):
    """Two copies of the small genscons tree: (stock, pool)."""
    return (generate_tree(tmp_path / 'stock'), generate_tree(tmp_path / 'pool'))


def objects_of(tree):
    return json.loads((tree / 'genscons.json').read_text())['counts']['objects']


def test_distcc_build_matches_stock_and_keeps_signatures(pool_module, distccd, trees,
                                                         tmp_path):
    stock, pooled = trees
    home = tmp_path / 'home'
    home.mkdir()
    r = run(scons_argv('-Q', '-j2', pool=False), stock, build_env(home, pool=False))
    assert r.returncode == 0, r
    before = distccd.compiles_ok()
    env = build_env(home, **distccd.client_env(tmp_path / 'distcc'))
    r = run(scons_argv('-Q', '-j4', LAUNCH), pooled, env)
    assert r.returncode == 0, r
    expected = objects_of(pooled)
    assert distccd.compiles_ok() - before == expected, distccd.log.read_text()[-3000:]
    assert ('spawnpool: distcc: %d compiles through distcc, 0 of them compiled locally'
            % expected) in r.stdout, r
    verify(stock, stock, pooled)
    # distcc preprocesses here and compiles the same text with the same gcc: the
    # objects (and the archives, deterministic in Debian's ar) are byte-identical.
    built_stock, built_pool = files(stock, {'.o', '.a'}), files(pooled, {'.o', '.a'})
    assert sorted(built_stock) == sorted(built_pool)
    assert [n for n in built_stock if built_stock[n] != built_pool[n]] == []
    # The launcher is added at spawn time: switching it off or on, or going back to
    # stock SCons, rebuilds nothing.
    compiles = distccd.compiles_ok()
    for argv in (scons_argv('-Q', '-j4'), scons_argv('-Q', '-j4', LAUNCH),
                 scons_argv('-Q', pool=False)):
        r = run(argv, pooled, env if '--process-spawner' in argv else
                build_env(home, pool=False))
        assert r.returncode == 0, r
        assert r.stdout.strip() == "scons: `.' is up to date.", r
    assert distccd.compiles_ok() == compiles


def test_home_and_distcc_variables_reach_distcc(pool_module, distccd, trees, tmp_path):
    """The SConstruct's ENV has only PATH; distcc still finds $HOME/.distcc/hosts (and
    keeps its state there: no DISTCC_DIR, which would replace ~/.distcc)."""
    _, tree = trees
    home = tmp_path / 'home'
    (home / '.distcc').mkdir(parents=True)
    hosts = distccd.client_env(tmp_path / 'distcc')
    (home / '.distcc' / 'hosts').write_text(hosts['DISTCC_HOSTS'] + '\n')
    before = distccd.compiles_ok()
    r = run(scons_argv('-Q', LAUNCH, 'f00000.o', 'f00001.o'), tree,
            build_env(home, DISTCC_FALLBACK='0'))    # no silent local compile
    assert r.returncode == 0, r
    assert distccd.compiles_ok() - before == 2


def test_distcc_failure_names_the_launcher(pool_module, trees, tmp_path):
    _, tree = trees
    env = build_env(tmp_path / 'home', DISTCC_HOSTS='127.0.0.1:%d' % free_port(),
                    DISTCC_FALLBACK='0', DISTCC_DIR=str(tmp_path / 'distcc'))
    (tmp_path / 'distcc').mkdir()
    r = run(scons_argv('-Q', LAUNCH, 'f00000.o'), tree, env)
    assert r.returncode != 0, r
    assert ('spawnpool: distcc failed to distribute (exit 116) for: gcc -o "f00000.o" -c'
            in r.stderr), r
    assert 'scons: *** [f00000.o] Error 116' in r.stderr, r
    assert '1 failed in distcc' in r.stdout, r


def test_local_fallbacks_are_counted(pool_module, trees, tmp_path):
    _, tree = trees
    env = build_env(tmp_path / 'home', DISTCC_HOSTS='127.0.0.1:%d' % free_port(),
                    DISTCC_FALLBACK='1', DISTCC_DIR=str(tmp_path / 'distcc'))
    (tmp_path / 'distcc').mkdir()
    r = run(scons_argv('-Q', '-j2', LAUNCH, 'f00000.o', 'f00001.o'), tree, env)
    assert r.returncode == 0, r
    assert 'running locally instead' in r.stderr, r      # distcc's own warning, kept
    assert '2 compiles through distcc, 2 of them compiled locally by distcc' in r.stdout, r


def test_distcc_build_inside_make_j2(pool_module, distccd, trees, tmp_path):
    """make -j2 runs `+scons -j8` with distcc: never more than 2 commands alive."""
    stock, tree = trees
    (tree / 'GNUmakefile').write_text(
        'all:\n\t+%s -Q -j8 %s\n' % (' '.join(map(str, scons_argv())), LAUNCH))
    env = build_env(tmp_path / 'home', **distccd.client_env(tmp_path / 'distcc'))
    before = distccd.compiles_ok()
    argv = ['timeout', '-s', 'KILL', str(TIMEOUT), 'make', '-j2']
    proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    sampler = CommandSampler(proc.pid)
    # Sample until make ends; output is small (one line per command), no pipe fills.
    while proc.poll() is None:
        sampler.sample()
        time.sleep(0.003)
    out, err = proc.communicate()
    left = wait_session_empty(proc.pid)
    kill_session(proc.pid)
    assert not left
    assert proc.returncode == 0, (out, err)
    assert sampler.samples > 20
    assert 1 <= sampler.most <= 2, (sampler.most, out, err)
    assert distccd.compiles_ok() - before == objects_of(tree)
    r = run(scons_argv('-Q', pool=False), stock, build_env(tmp_path / 'home', pool=False))
    assert r.returncode == 0, r
    verify(stock, stock, tree)
