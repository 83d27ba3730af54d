"""scripts/install-scons-plugin also installs ~/.local/bin/spawnpool, a launcher for
`spawnpool run` (/usr/bin/python3 -P -m spawnpool); --uninstall removes it."""

import os
import subprocess

from scons_e2e import BUILD, REPO, base_env, run_session

SCRIPT = REPO / 'scripts' / 'install-scons-plugin'


def test_launcher_installed_and_removed(pool_module, tmp_path):
    home = tmp_path / 'home'
    home.mkdir()
    env = base_env(HOME=str(home), SPAWNPOOL_BUILD=str(BUILD))
    rc, out, err, _ = run_session([str(SCRIPT)], REPO, env, timeout=900)
    assert rc == 0, (out, err)
    launcher = home / '.local' / 'bin' / 'spawnpool'
    assert launcher.is_file() and os.access(launcher, os.X_OK), out

    # From a directory holding a `spawnpool` folder of its own, without PYTHONPATH: the
    # installed package runs (-P keeps the cwd off sys.path).
    work = tmp_path / 'work'
    (work / 'spawnpool').mkdir(parents=True)
    (work / 'spawnpool' / '__init__.py').write_text('raise SystemExit("wrong package")\n')
    (work / 'cmds').write_text('echo one\ntouch made\n')
    r = subprocess.run([str(launcher), 'run', '-j2', 'cmds'], cwd=work, env=env,
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, 'one\n', ''), r
    assert (work / 'made').exists()

    rc, out, err, _ = run_session([str(SCRIPT), '--uninstall'], REPO, env, timeout=120)
    assert rc == 0, (out, err)
    assert not launcher.exists()
