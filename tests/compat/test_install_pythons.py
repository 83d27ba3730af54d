"""The module under every CPython, and scripts/install-scons-plugin for the interpreter
that runs the user's SCons: the default found from the `scons` on PATH, a pyenv python, a
virtualenv; and the site_init.py block in SCons builds whose Python cannot import the
plugin (silent without the option; one warning and a stock build with it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import compat_matrix as matrix
from compat_matrix import scons_e2e

SCRIPT = matrix.REPO / 'scripts' / 'install-scons-plugin'
SITE_INIT = Path('.scons') / 'site_scons' / 'site_init.py'

SCONSTRUCT = '''
env = Environment()
conf = Configure(env)
conf.CheckCHeader('stdio.h')
env = conf.Finish()
env.Program('hello', 'hello.c')
probe = env.Command('probe.txt', [], 'p=$$PPID; while [ $$p -gt 1 ]; do cat /proc/$$p/comm; '
                    'p=$$(cut -d" " -f4 /proc/$$p/stat); done > $TARGET')
Default('hello', probe)
'''


def pythons():
    """(label, interpreter or None): /usr/bin/python3 and pyenv's CPython 3.8-3.13."""
    out = [('system', matrix.SYSTEM_PYTHON)]
    out += [(v, matrix.pyenv_python(v)) for v in matrix.PYTHONS]
    return out


def need_python(python, version):
    if not python:
        pytest.skip('CPython %s not found (pyenv: %s)' % (version, matrix.PYENV_ROOT))
    problem = matrix.module_problem(python)
    if problem:
        pytest.skip(problem)
    return python


def need_release(release):
    problem = matrix.release_problem(release)
    if problem:
        pytest.skip(problem)


POOL_CHECK = r'''
import sys, spawnpool
from spawnpool import _spawnpool
suffix = _spawnpool.__file__.rsplit('_spawnpool', 1)[1]
with spawnpool.Pool(slots=2) as pool:
    ok = pool.run(['sh', '-c', 'echo "$0"; echo err >&2; exit 3', 'from the pool'],
                  capture=True)
    killed = pool.run(['sh', '-c', 'kill -9 $$'])
print(suffix, ok.returncode, ok.stdout.decode().strip(), ok.stderr.decode().strip(),
      killed.returncode)
'''


@pytest.mark.parametrize('version, python', pythons(), ids=[p[0] for p in pythons()])
def test_module_imports_and_runs_a_pool(version, python):
    need_python(python, version)
    r = subprocess.run([python, '-c', POOL_CHECK], cwd='/', capture_output=True, text=True,
                       timeout=120, env=scons_e2e.base_env(
                           PYTHONPATH=str(scons_e2e.MODULE_DIR)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [matrix.ext_suffix(python), '3', 'from', 'the', 'pool', 'err',
                                '-9'], r.stdout


# --- install-scons-plugin -----------------------------------------------------------------

def install(home, *args, path=None):
    env = scons_e2e.base_env(HOME=str(home), SPAWNPOOL_BUILD=str(scons_e2e.BUILD))
    if path:
        env['PATH'] = path
    rc, out, err, _ = scons_e2e.run_session([sys.executable, str(SCRIPT)] + list(args),
                                            matrix.REPO, env, timeout=900)
    out, err = out.decode(errors='replace'), err.decode(errors='replace')
    assert rc == 0, (out, err)
    return out


def project(root):
    root = Path(root)
    root.mkdir(parents=True)
    (root / 'SConstruct').write_text(SCONSTRUCT)
    (root / 'hello.c').write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    return root


def scons(root, scons_cmd, home, *args, path=None, **extra):
    """Run an SCons build in a new session without PYTHONPATH; a scons_e2e.Run."""
    env = scons_e2e.base_env(HOME=str(home), **extra)
    if path:
        env['PATH'] = path
    argv = [str(scons_cmd), '-Q'] + list(args)
    rc, out, err, sid = scons_e2e.run_session(argv, root, env)
    left = scons_e2e.wait_session_empty(sid)
    scons_e2e.kill_session(sid)
    assert not left, 'processes left behind: %s' % scons_e2e.describe_pids(left)
    return scons_e2e.Run(argv, rc, out, err, root)


def pool_ran(root):
    """Whether the probe's shell was started by a spawnpool spawner (else by SCons)."""
    chain = (Path(root) / 'probe.txt').read_text().split()
    return chain[0].startswith('spawnpool')


def test_default_is_the_interpreter_of_the_scons_on_path(releases, tmp_path):
    """`#!/usr/bin/env python3` in the scons on PATH, python3 a pyenv CPython there."""
    need_release(matrix.NEWEST)
    version = next((v for v in ('3.9', '3.12', '3.10', '3.8', '3.13') if matrix.pyenv_python(v)),
                   None)
    python = need_python(version and matrix.pyenv_python(version), version or '3.x')
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'python3').symlink_to(python)
    scons_cmd = matrix.scons_command(releases.get(matrix.NEWEST), python, bin_dir,
                                     shebang='/usr/bin/env python3')
    path = '%s:/usr/bin:/bin' % bin_dir
    home = tmp_path / 'home'
    out = install(home, path=path)
    assert 'interpreter: %s (CPython %s.' % (bin_dir / 'python3', version) in out, out
    assert 'SCons: SCons %s (%s)' % (matrix.NEWEST, scons_cmd) in out, out
    site = home / '.local' / 'lib' / ('python' + version) / 'site-packages'
    assert (site / 'spawnpool' / ('_spawnpool' + matrix.ext_suffix(python))).is_file()
    root = project(tmp_path / 'proj')
    r = scons(root, scons_cmd, home, '--process-spawner', path=path)
    assert r.returncode == 0 and 'warning' not in r.stderr, r
    assert pool_ran(root), r
    out = install(home, '--uninstall', path=path)
    assert not (site / 'spawnpool').exists() and not (home / SITE_INIT).exists(), out


def test_pyenv_python_and_the_other_interpreters(releases, tmp_path):
    """--python a pyenv CPython: its SCons uses the pool; Debian's scons (another Python,
    same site_init.py) stays silent without the option and warns once with it."""
    need_release(matrix.NEWEST)
    python = need_python(matrix.pyenv_python('3.12'), '3.12')
    home = tmp_path / 'home'
    out = install(home, '--python', python)
    assert 'interpreter: %s (CPython 3.12.' % python in out and 'as given by --python' in out
    scons_cmd = matrix.scons_command(releases.get(matrix.NEWEST), python, tmp_path / 'bin')
    root = project(tmp_path / 'proj')
    r = scons(root, scons_cmd, home, '--process-spawner', '-j2')
    assert r.returncode == 0 and 'warning' not in r.stderr, r
    assert pool_ran(root)

    debian = project(tmp_path / 'debian')
    quiet = scons(debian, scons_e2e.SCONS, home)
    assert quiet.returncode == 0 and quiet.stderr == '', quiet
    scons(debian, scons_e2e.SCONS, home, '-c')
    loud = scons(debian, scons_e2e.SCONS, home, '--process-spawner')
    assert loud.returncode == 0 and not pool_ran(debian), loud
    assert loud.stdout == quiet.stdout, (quiet, loud)
    assert len(loud.stderr.splitlines()) == 1, loud
    assert loud.stderr.startswith('scons: warning: --process-spawner is unavailable: ')
    install(home, '--python', python, '--uninstall')


def test_virtualenv(releases, tmp_path):
    """A venv has no user site: the packages and the launcher go into the venv."""
    need_release(matrix.NEWEST)
    venv = tmp_path / 'venv'
    made = subprocess.run([matrix.SYSTEM_PYTHON, '-m', 'venv', '--without-pip', str(venv)],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip('%s cannot make a venv: %s' % (matrix.SYSTEM_PYTHON, made.stderr))
    python = venv / 'bin' / 'python3'
    home = tmp_path / 'home'
    out = install(home, '--python', str(python))
    assert 'virtualenv' in out, out
    site = Path(subprocess.run([str(python), '-c', 'import sysconfig; '
                                'print(sysconfig.get_paths()["purelib"])'],
                               capture_output=True, text=True).stdout.strip())
    assert (site / 'spawnpool' / '__init__.py').is_file() and (site / 'spawnpool_scons').is_dir()
    assert (venv / 'bin' / 'spawnpool').is_file()
    assert not (home / '.local').exists()
    scons_cmd = matrix.scons_command(releases.get(matrix.NEWEST), str(python), venv / 'bin')
    root = project(tmp_path / 'proj')
    r = scons(root, scons_cmd, home, '--process-spawner')
    assert r.returncode == 0 and 'warning' not in r.stderr, r
    assert pool_ran(root)
    install(home, '--python', str(python), '--uninstall')
    assert not (site / 'spawnpool').exists() and not (venv / 'bin' / 'spawnpool').exists()


# --- the site_init.py block where the plugin is not importable ---------------------------

@pytest.fixture(scope='module')
def block_home(tmp_path_factory):
    """A HOME whose ~/.scons has the block, and no plugin any Python can import (as if it
    were installed for another interpreter)."""
    home = tmp_path_factory.mktemp('block') / 'home'
    install(home)
    site = home / '.local'
    subprocess.run(['rm', '-rf', str(site)], check=True)
    assert (home / SITE_INIT).is_file()
    return home


RELEASE_ROWS = list(matrix.RELEASES) + [matrix.DEBIAN]


@pytest.mark.parametrize('release', RELEASE_ROWS)
def test_block_without_the_plugin(releases, block_home, tmp_path, release):
    if release == matrix.DEBIAN:
        scons_cmd = scons_e2e.SCONS
    else:
        need_release(release)
        scons_cmd = releases.scons(release, matrix.SYSTEM_PYTHON)
    empty_home = tmp_path / 'empty'
    empty_home.mkdir()
    runs = {}
    for name, args, extra in (
            ('stock', [], {}),
            ('plain', [], {}),
            ('features only', ['--process-spawner-stats', '--process-spawner-output=sync'], {}),
            ('option', ['--process-spawner'], {}),
            ('SCONSFLAGS', [], {'SCONSFLAGS': '--process-spawner'})):
        root = project(tmp_path / name.replace(' ', '-'))
        home = empty_home if name == 'stock' else block_home
        runs[name] = (root, scons(root, scons_cmd, home, *args, **extra))
    stock_root, stock = runs['stock']
    assert stock.returncode == 0 and not pool_ran(stock_root), stock
    for name, (root, r) in runs.items():
        stderr = r.stderr
        if name in ('option', 'SCONSFLAGS'):
            lines = stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith(
                'scons: warning: --process-spawner is unavailable: ') and (
                "No module named 'spawnpool_scons'" in lines[0]), (name, r)
            stderr = ''
        assert (r.returncode, r.stdout, stderr) == (0, stock.stdout, stock.stderr), (name, r)
        assert not pool_ran(root), name
        scons_e2e.assert_same_outputs(_Tree(stock_root), _Tree(root))


class _Tree:
    """scons_e2e.assert_same_outputs wants .outputs(): the built files but the probe."""

    def __init__(self, root):
        self.root = root

    def outputs(self):
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob('*'))
                if p.is_file() and p.name not in scons_e2e.NOT_OUTPUTS}
