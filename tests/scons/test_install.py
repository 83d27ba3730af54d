"""scripts/install-scons-plugin into a temp HOME: every project gets --process-spawner."""

import subprocess

from scons_e2e import BUILD, REPO, SCONS, SITE_DIR, SYSTEM_PYTHON, base_env, run_session

SCRIPT = REPO / 'scripts' / 'install-scons-plugin'


def script(home, *args):
    rc, out, err, _ = run_session([str(SCRIPT)] + list(args), REPO,
                                  base_env(HOME=str(home), SPAWNPOOL_BUILD=str(BUILD)),
                                  timeout=900)   # it builds first if build/ is missing
    assert rc == 0, (out.decode(errors='replace'), err.decode(errors='replace'))
    return out.decode()


def import_check(home, tmp_path):
    return subprocess.run([SYSTEM_PYTHON, '-c', 'import spawnpool; print(spawnpool.__file__)'],
                          cwd=tmp_path, env=base_env(HOME=str(home)),  # no PYTHONPATH
                          capture_output=True, text=True, timeout=60)


def chain(project):
    names = project.read('probe.txt').split()
    return names[:names.index('scons')]


def test_install_enables_every_project(pool_module, project, tmp_path):
    home = project.home
    user_init = home / '.scons' / 'site_scons' / 'site_init.py'
    user_init.parent.mkdir(parents=True)
    user_init.write_text("USER_SETTING = 'kept'\n")

    script(home)
    script(home)        # idempotent: one block, still works
    text = user_init.read_text()
    assert text.startswith("USER_SETTING = 'kept'\n")
    assert text.count('spawnpool_scons.enable()') == 1, text

    r = import_check(home, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(home)), r.stdout

    # A project with no site_scons of its own, no PYTHONPATH: the user's site_init and
    # user site-packages do it all.
    assert not (project.root / 'site_scons').exists()
    env = project.env(pool=False)
    assert 'PYTHONPATH' not in env
    r = project.scons(argv=[SCONS, '-Q', '--process-spawner', 'probe', 'main'], env=env)
    assert r.returncode == 0, r
    assert any('spawnpool' in n for n in chain(project)), chain(project)
    assert project.read('gen/WORDS.txt').startswith('ALPHA BETA\n')

    # A project that also enables the plugin itself: enable() twice is fine.
    (project.root / 'site_scons').mkdir()
    (project.root / 'site_scons' / 'site_init.py').write_text(
        (SITE_DIR / 'site_init.py').read_text())
    r = project.scons(argv=[SCONS, '-Q', '--process-spawner', 'probe'], env=env)
    assert r.returncode == 0, r
    assert any('spawnpool' in n for n in chain(project)), chain(project)

    out = script(home, '--uninstall')
    assert 'removed' in out
    assert user_init.read_text() == "USER_SETTING = 'kept'\n"
    assert import_check(home, tmp_path).returncode != 0
    (project.root / 'site_scons').rename(project.root / 'site_scons.off')
    r = project.scons(argv=[SCONS, '-Q', '--process-spawner'], env=env)
    assert r.returncode == 2 and 'no such option: --process-spawner' in r.stderr, r
