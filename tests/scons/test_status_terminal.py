"""The status line in a real terminal (issue 18, "Done when"): `scons --process-spawner -j2`
runs in tmux (a private server: -S), and the screen is read with capture-pane while the
build runs and after it: the progress line at the bottom with every command line above it
intact, a resize followed, and at the end the screen stock leaves plus one summary line.
Ctrl-C clears the line and exits as stock.  Skipped (saying why) without tmux."""

import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
import time

import pytest

from scons_e2e import MODULE_DIR, PLUGIN_DIR, SCONS, SITE_DIR, base_env

TMUX = shutil.which('tmux')
PROGRESS = re.compile(r'^\[\d+/\d+ \d+%\] \d+:\d\d elapsed, (~\d+:\d\d left|no estimate yet)')
SUMMARY = re.compile(r'^\[(\d+)/(\d+) 100%\] \d+:\d\d elapsed, done(, (\d+) failed)?$')
INTERRUPTED = re.compile(r'^\[(\d+)/(\d+) 100%\] \d+:\d\d elapsed, interrupted$')
COMMANDS = 12
# Short lines (< 60 columns) so that the narrower terminal after the resize wraps none;
# 12 x 0.8 s on 2 slots: the build runs for about 5 s, long after the resize.
SCONSTRUCT = '''
env = Environment()
for i in range(%d):
    env.Command('t%%02d.txt' %% i, [], 'echo out-%%02d; sleep 0.8; echo ok > $TARGET' %% i)
''' % COMMANDS

pytestmark = pytest.mark.skipif(TMUX is None, reason='tmux is not installed')


class Tmux:
    """One private tmux server with one window running `command` in sh.  The sh traps
    SIGINT (a handler, which exec resets: the build gets the default) so that Ctrl-C,
    sent to the whole foreground group, leaves it to print the exit status."""

    def __init__(self, name, command, width=100, height=40):
        # The server's socket in a directory of the test's own (-S), not under tmux's
        # /tmp/tmux-UID, which -L would create and leave behind; close() removes it
        # (kill-server leaves the socket file, tmux 3.3a).
        self.directory = tempfile.mkdtemp(prefix=name + '-')
        self.base = [TMUX, '-S', os.path.join(self.directory, 'socket'), '-f', '/dev/null']
        try:
            subprocess.run(self.base + ['new-session', '-d', '-x', str(width), '-y', str(height),
                                        '-s', 'build', 'sh', '-c', 'trap : INT; ' + command + '; echo __EXIT__$?; sleep 600'],
                           check=True, env=dict(os.environ, TMUX=''))
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def screen(self):
        """The pane's lines, its history included, trailing blank lines dropped."""
        out = subprocess.run(self.base + ['capture-pane', '-p', '-S', '-', '-t', 'build'],
                             capture_output=True, text=True).stdout
        return out.rstrip('\n').split('\n')

    def run(self, *args):
        subprocess.run(self.base + list(args), check=True)

    def wait_exit(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            done = [l for l in screen if l.startswith('__EXIT__')]
            if done:
                return int(done[0][len('__EXIT__'):]), screen[:screen.index(done[0])]
            time.sleep(0.1)
        pytest.fail('the build in tmux did not end:\n' + '\n'.join(self.screen()))

    def close(self):
        subprocess.run(self.base + ['kill-server'], capture_output=True)
        shutil.rmtree(self.directory, ignore_errors=True)


def scons_command(root, pool, *args):
    env = base_env(TERM='screen', HOME=str(root.parent))
    env.pop('NO_COLOR', None)
    env.pop('CLICOLOR_FORCE', None)
    if pool:
        env['PYTHONPATH'] = os.pathsep.join([str(MODULE_DIR), str(PLUGIN_DIR)])
        argv = [SCONS, '--site-dir=%s' % SITE_DIR, '--process-spawner'] + list(args)
    else:
        argv = [SCONS] + list(args)
    assignments = ' '.join('%s=%s' % (k, shlex.quote(v)) for k, v in sorted(env.items()))
    return 'cd %s && env -i %s %s' % (shlex.quote(str(root)), assignments,
                                      ' '.join(map(shlex.quote, argv)))


def make_project(path):
    path.mkdir(parents=True)
    (path / 'SConstruct').write_text(SCONSTRUCT)
    return path


def build_lines():
    lines = set()
    for i in range(COMMANDS):
        lines.add('echo out-%02d; sleep 0.8; echo ok > t%02d.txt' % (i, i))
        lines.add('out-%02d' % i)
    return lines


def run_stock(tmp_path, *args):
    root = make_project(tmp_path / 'stock')
    tmux = Tmux('spawnpool-stock', scons_command(root, False, '-Q', '-j2', *args))
    try:
        return tmux.wait_exit()
    finally:
        tmux.close()


def test_the_status_line_in_tmux(pool_module, tmp_path):
    stock_rc, stock = run_stock(tmp_path)
    assert stock_rc == 0 and stock, stock
    root = make_project(tmp_path / 'pool')
    tmux = Tmux('spawnpool-pool', scons_command(root, True, '-Q', '-j2'))
    expected = build_lines()
    try:
        during, resized_at, after_resize = [], None, []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            screen = tmux.screen()
            if any(l.startswith('__EXIT__') for l in screen):
                break
            if PROGRESS.match(screen[-1]):
                (after_resize if resized_at else during).append(screen)
                if resized_at is None and len(during) >= 3:
                    tmux.run('resize-window', '-t', 'build', '-x', '60')
                    resized_at = time.monotonic()
            time.sleep(0.05)
        rc, final = tmux.wait_exit()
    finally:
        tmux.close()
    assert during, 'no screen with the progress line at the bottom'
    for screen in during + after_resize:
        # Every line above the progress line is one of the build's, whole.
        above = [l for l in screen[:-1] if l.strip()]
        assert all(l in expected for l in above), screen
    # The resize is followed: the line fits the narrower terminal, and no row of the old,
    # wider line is left above it.
    late = [s for s in after_resize if len(s[-1]) <= 59]
    assert late, after_resize[-3:] or during[-1]
    # The end: stock's screen plus one summary line, no progress line left.
    assert rc == stock_rc
    lines = [l for l in final if l.strip()]
    summary = SUMMARY.match(lines[-1])
    assert summary and int(summary.group(1)) == int(summary.group(2)) == COMMANDS, final
    assert sorted(lines[:-1]) == sorted(l for l in stock if l.strip()), (stock, final)


def test_ctrl_c_clears_the_line_and_exits_as_stock(pool_module, tmp_path):
    def interrupted(pool):
        root = make_project(tmp_path / ('pool' if pool else 'stock'))
        tmux = Tmux('spawnpool-int-%d' % pool, scons_command(root, pool, '-Q', '-j2'))
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                screen = tmux.screen()
                if sum(1 for l in screen if l.startswith('out-')) >= 3:
                    break
                time.sleep(0.05)
            tmux.run('send-keys', '-t', 'build', 'C-c')
            return tmux.wait_exit()
        finally:
            tmux.close()

    def messages(screen):
        # SCons' lines, the target's name left out (which commands were running when
        # the key came is timing) and the terminal's echo of the key (^C) dropped.
        # SCons 4.7+'s NewParallel scheduler reports a command the interrupt ended as
        # 'Error -2' (killed by SIGINT) or 'Build interrupted.' by a race of its own, stock
        # too (tests/compat/compat_matrix.py): both are the same message here.
        lines = [l[2:] if l.startswith('^C') else l for l in screen]
        return {re.sub(r'\[t\d\d\.txt\]', '[T]', l).replace('] Error -2', '] Build interrupted.')
                for l in lines if l.startswith('scons:')}

    stock_rc, stock = interrupted(False)
    rc, final = interrupted(True)
    assert rc == stock_rc != 0, (stock, final)
    lines = [l for l in final if l.strip()]
    # The line is cleared: no progress line is left, the summary says what happened.
    assert not any(PROGRESS.match(l) for l in lines), final
    assert INTERRUPTED.match(lines[-1]), final
    assert messages(stock) == {'scons: *** [T] Build interrupted.'}, stock
    assert messages(lines) == messages(stock), (stock, final)
    expected = build_lines()
    assert all(l in expected for l in lines[:-1] if not l.startswith('scons:')), final
    # The history keeps the interrupted build's account of its units (given at exit).
    with sqlite3.connect(str(tmp_path / 'pool' / '.spawnpool' / 'memory-history.sqlite')) as db:
        kinds = [row[0] for row in db.execute('SELECT kinds FROM builds')]
    units, commands, out_of_date, made_ready = map(int, kinds[0].split()[:4])
    assert len(kinds) == 1 and kinds[0].endswith(' txt\n'), kinds
    assert 1 <= units == commands <= out_of_date <= made_ready, (kinds, final)
