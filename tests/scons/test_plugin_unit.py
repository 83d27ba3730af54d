"""The plugin in-process, on the shared FakeRunner: its SPAWN/PSPAWN mapping, stream
handling and error reporting; and its hooks, found by feature on fake SCons of each
shape (4.0-4.4, 4.5 to today's master, unknown).

These need no scons run; the rest of the directory checks the real thing end to end.
"""

import errno
import importlib.util
import io
import itertools
import os
import signal
import sys
import types

import pytest

from scons_e2e import MODULE_DIR, PLUGIN_DIR

SCons = pytest.importorskip('SCons.Platform.posix', reason='SCons is not importable here')
sys.path.insert(0, str(PLUGIN_DIR))
sys.path.insert(0, str(MODULE_DIR))
import spawnpool_scons as plugin  # noqa: E402
from spawnpool import Command, Result  # noqa: E402
from spawnpool.testing import FakeRunner  # noqa: E402


@pytest.fixture
def fake(monkeypatch):
    """Puts a session of FakeRunners in place of the plugin's; yields a setter."""
    import SCons.Platform.posix as posix
    monkeypatch.setattr(plugin, '_posix', posix)
    monkeypatch.setattr(plugin, '_Command', Command)
    monkeypatch.setattr(plugin, '_stale', False)

    def use(answer):
        runner = FakeRunner(answer)
        session = types.SimpleNamespace(runner=runner, checks_runner=runner)
        monkeypatch.setattr(plugin, '_session', session)
        return runner
    return use


ARGV = ['sh', '-c', 'gcc -c x.c']
ENV = {'PATH': '/usr/bin:/bin'}


def test_spawn_passes_argv_env_and_current_cwd(fake):
    runner = fake(Result(returncode=7))
    assert plugin._pool_exec_subprocess(ARGV, ENV) == 7
    (command,) = runner.commands
    assert (command.argv, command.env, command.cwd, command.output) == (
        ARGV, ENV, os.getcwd(), 'passthrough')


def test_pspawn_same_stream_is_merged_and_written_to_its_fd(fake, tmp_path):
    runner = fake(Result(returncode=1, stdout=b'out and err\n'))
    with open(tmp_path / 'log', 'w') as log:
        log.write('before\n')           # still in the Python buffer: must come first
        assert plugin._pool_exec_popen3(ARGV, ENV, log, log) == 1
        log.write('after\n')
    assert (tmp_path / 'log').read_text() == 'before\nout and err\nafter\n'
    assert runner.commands[0].output == 'capture_merged'


def test_pspawn_separate_streams_and_no_fileno(fake):
    fake(Result(returncode=0, stdout=b'to out\n', stderr='to err \xe9\n'.encode()))
    out, err = io.StringIO(), io.StringIO()
    assert plugin._pool_exec_popen3(ARGV, ENV, out, err) == 0
    assert out.getvalue() == 'to out\n'
    assert err.getvalue() == 'to err \xe9\n'


def test_pspawn_without_streams_is_passthrough(fake):
    runner = fake(Result(returncode=0))
    assert plugin._pool_exec_popen3(ARGV, ENV, None, None) == 0
    assert runner.commands[0].output == 'passthrough'


def failed(stage, number, message):
    return Result(failure=stage, error_number=number, error_message=message)


@pytest.mark.parametrize('result, words', [
    (failed('spawner_died', errno.ECHILD, 'the spawner process died while running it'),
     ': the spawner process died while running it; '),
    (failed('chdir', 2, "cannot enter working directory '/gone'"), '(stage chdir)'),
    (failed('request', 22, 'bad request'), 'bad request (stage request)'),
    (failed('pool_closed', errno.ESHUTDOWN, 'the pool is closed'), '(stage pool_closed)'),
])
def test_spawn_failures_become_one_line_and_error_2(fake, capfd, tmp_path, result, words):
    fake(result)
    assert plugin._pool_exec_subprocess(ARGV, ENV) == 2
    with open(tmp_path / 'log', 'w') as log:
        assert plugin._pool_exec_popen3(ARGV, ENV, log, log) == 2
    err = capfd.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], err
    assert lines[0].startswith('scons: *** --process-spawner: ') and words in lines[0], err
    assert lines[0].endswith('; command: gcc -c x.c')
    assert (tmp_path / 'log').read_text() == lines[0] + '\n'   # and in config.log


@pytest.mark.parametrize('result', [
    failed('exec', 2, "cannot execute 'sh': No such file or directory"),
    failed('request', 7, 'argument 2 is 140005 bytes; exec accepts at most 131071'),
])
def test_exec_failures_raise_what_stock_popen_raises(fake, result):
    # SCons turns these into "scons: *** [target] sh: <strerror>", as with stock.
    fake(result)
    with pytest.raises(OSError) as info:
        plugin._pool_exec_subprocess(ARGV, ENV)
    assert (info.value.errno, info.value.strerror, info.value.filename) == (
        result.error_number, os.strerror(result.error_number), 'sh')


# --- the hooks, on fake SCons of each shape ----------------------------------------------

_copies = itertools.count()


def fresh_plugin():
    """A copy of the plugin module with its own state (enable() runs once per copy)."""
    path = PLUGIN_DIR / 'spawnpool_scons' / '__init__.py'
    spec = importlib.util.spec_from_file_location('spawnpool_scons_%d' % next(_copies), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stock_exec(l, env):
    return 'stock'


def stock_popen3(l, env, stdout, stderr):
    return 'stock'


class FakeParser:
    preserve_unknown_options = False

    def __init__(self, on):
        self.values = types.SimpleNamespace(process_spawner=on, num_jobs=1)
        self.flags = set()

    def has_option(self, flag):
        return flag in self.flags


def fake_scons(monkeypatch, shape, option_on):
    """Installs a fake SCons package of `shape` in sys.modules: 'job' (4.0-4.4:
    SCons.Job), 'taskmaster' (4.5 to master: SCons.Taskmaster.Job), or what a shape we
    do not know lacks: 'no-jobs', 'no-popen3'."""
    modules = {}

    def module(name, package=False, **attrs):
        m = types.ModuleType(name)
        if package:
            m.__path__ = []
        m.__dict__.update(attrs)
        modules[name] = m
        return m

    class Jobs:
        def _setup_sig_handler(self):
            self.handled = True
            signal.signal(signal.SIGTERM, scons_handler)

    def scons_handler(signum, frame):
        pass

    parser = FakeParser(option_on)

    def add_option(flag, **kw):
        parser.flags.add(flag)
        if not hasattr(parser.values, kw['dest']):
            setattr(parser.values, kw['dest'], kw.get('default'))

    posix = {'exec_subprocess': stock_exec, 'exec_popen3': stock_popen3}
    if shape == 'no-popen3':
        del posix['exec_popen3']
    module('SCons', package=True, __version__='9.9.9-fake')
    module('SCons.Platform', package=True)
    module('SCons.Platform.posix', **posix)
    module('SCons.Script', package=True)
    module('SCons.Script.Main', OptionsParser=parser, AddOption=add_option)
    if shape == 'taskmaster':
        module('SCons.Taskmaster', package=True)
        module('SCons.Taskmaster.Job', Jobs=Jobs)
    else:
        module('SCons.Taskmaster')          # a plain module, as before 4.5
        if shape != 'no-jobs':
            module('SCons.Job', Jobs=Jobs)
    for name in [n for n in sys.modules if n == 'SCons' or n.startswith('SCons.')]:
        monkeypatch.delitem(sys.modules, name)
    for name, m in modules.items():
        monkeypatch.setitem(sys.modules, name, m)
        parent, _, child = name.rpartition('.')
        if parent:
            setattr(modules[parent], child, m)
    return types.SimpleNamespace(modules=modules, Jobs=Jobs, parser=parser,
                                 handler=scons_handler)


@pytest.mark.parametrize('shape', ['job', 'taskmaster'])
def test_hooks_found_in_each_known_shape(monkeypatch, shape):
    scons = fake_scons(monkeypatch, shape, option_on=False)
    posix, jobs = fresh_plugin().find_hooks()
    assert posix is scons.modules['SCons.Platform.posix'] and jobs is scons.Jobs


@pytest.mark.parametrize('shape', ['no-jobs', 'no-popen3'])
def test_unknown_shape_is_none(monkeypatch, shape):
    fake_scons(monkeypatch, shape, option_on=False)
    assert fresh_plugin().find_hooks() is None


@pytest.mark.parametrize('shape', ['job', 'taskmaster'])
def test_enable_hooks_in(monkeypatch, shape, capfd):
    scons = fake_scons(monkeypatch, shape, option_on=True)
    copy = fresh_plugin()
    copy.enable()
    posix = scons.modules['SCons.Platform.posix']
    assert posix.exec_subprocess is copy._pool_exec_subprocess
    assert posix.exec_popen3 is copy._pool_exec_popen3
    assert {'--process-spawner', '--process-spawner-output', '--process-spawner-stats',
            '--process-spawner-launcher', '--process-spawner-jobserver'} <= scons.parser.flags
    # When a Jobs run starts, SCons' handlers are chained to the session's interrupt,
    # and a num_jobs that changed since the pool started (SetOption, --interactive's
    # -j) asks for a resize before any of its commands starts.
    copy._stale, copy._pool, copy._slots = False, object(), 1
    scons.parser.values.num_jobs = 4
    old = signal.getsignal(signal.SIGTERM)
    try:
        jobs = scons.Jobs()
        jobs._setup_sig_handler()
        assert jobs.handled
        handler = signal.getsignal(signal.SIGTERM)
        assert handler.__wrapped__ is scons.handler
    finally:
        signal.signal(signal.SIGTERM, old)
    assert copy._stale
    copy._pool = None
    # A second copy of the plugin (~/.scons and the project's site_scons) patches nothing.
    fresh_plugin().enable()
    assert posix.exec_subprocess is copy._pool_exec_subprocess
    assert capfd.readouterr() == ('', '')


class FakeWatch:
    """interrupts.SignalWatch's face: start() takes the wake-up pipe (here: a number)."""

    def __init__(self, fd=None):
        self.fd = fd

    def start(self):
        if self.fd is None:
            self.fd = 99


@pytest.mark.parametrize('watching_before', [False, True])
def test_a_pool_made_before_the_watch_is_made_again_with_its_pipe(monkeypatch,
                                                                  watching_before):
    """The pool reads the watch's pipe (stop_signal_fd), given when it is made: one made
    for Configure checks, before the Jobs run started the watch, is made anew."""
    scons = fake_scons(monkeypatch, 'taskmaster', option_on=True)
    copy = fresh_plugin()
    copy.enable()
    settings = types.SimpleNamespace(trace=None, report=None, jobserver=True,
                                     commands_may_wait=lambda jobserver: True)
    monkeypatch.setattr(copy, '_session',
                        types.SimpleNamespace(settings=settings, interrupted=False))
    monkeypatch.setattr(copy, '_watch', FakeWatch(7 if watching_before else None))
    copy._stale, copy._pool, copy._slots = False, object(), 1
    scons.parser.values.num_jobs = 1
    old = signal.getsignal(signal.SIGTERM)
    try:
        scons.Jobs()._setup_sig_handler()
    finally:
        signal.signal(signal.SIGTERM, old)
        pool, copy._pool = copy._pool, None
    assert copy._watch.fd is not None
    assert copy._stale is not watching_before
    assert (copy._slots == 0) is not watching_before    # 0: no pool's size: made anew
    assert pool is not None


@pytest.mark.parametrize('option_on', [False, True])
@pytest.mark.parametrize('shape', ['no-jobs', 'no-popen3'])
def test_unknown_shape_warns_once_if_asked_and_changes_nothing(monkeypatch, capfd, shape,
                                                                option_on):
    scons = fake_scons(monkeypatch, shape, option_on)
    fresh_plugin().enable()
    fresh_plugin().enable()                 # two copies: still one warning
    posix = scons.modules['SCons.Platform.posix']
    assert posix.exec_subprocess is stock_exec
    assert getattr(posix, 'exec_popen3', stock_popen3) is stock_popen3
    err = capfd.readouterr().err
    if option_on:
        assert err.count('\n') == 1 and err.startswith(
            'scons: warning: --process-spawner: not supported by this SCons (9.9.9-fake'), err
    else:
        assert err == ''
    assert '--process-spawner' in scons.parser.flags    # the option is still accepted


def test_without_the_option_the_first_spawn_puts_stock_back(monkeypatch, capfd):
    scons = fake_scons(monkeypatch, 'taskmaster', option_on=False)
    copy = fresh_plugin()
    copy.enable()
    posix = scons.modules['SCons.Platform.posix']
    assert posix.exec_subprocess(['sh', '-c', 'x'], {}) == 'stock'
    assert posix.exec_subprocess is stock_exec and posix.exec_popen3 is stock_popen3
    assert capfd.readouterr() == ('', '')


def unstartable_pool(monkeypatch):
    import spawnpool

    class Pool:
        def __init__(self, slots, **kw):
            raise OSError(errno.EMFILE, 'test: cannot start spawners')
    monkeypatch.setattr(spawnpool, 'Pool', Pool)


def test_pool_that_cannot_start_keeps_the_options_on_popen(monkeypatch, capfd, tmp_path):
    scons = fake_scons(monkeypatch, 'taskmaster', option_on=True)
    scons.parser.values.process_spawner_stats = True
    unstartable_pool(monkeypatch)
    copy = fresh_plugin()
    copy.enable()
    copy._exit_registered = True         # no report at the end of pytest
    posix = scons.modules['SCons.Platform.posix']
    assert posix.exec_subprocess(['sh', '-c', 'exit 3'], dict(os.environ)) == 3
    assert posix.exec_subprocess(['sh', '-c', 'exit 0'], dict(os.environ)) == 0
    err = capfd.readouterr().err
    assert err.count('could not start the process pool (test: cannot start spawners); '
                     'using the default spawner.') == 1, err
    assert copy._session.stats.commands == 2 and copy._session.stats.failed == 1
    assert type(copy._session.base).__name__ == 'PopenRunner'


def test_pool_that_cannot_start_without_options_is_stock(monkeypatch, capfd):
    scons = fake_scons(monkeypatch, 'taskmaster', option_on=True)
    unstartable_pool(monkeypatch)
    copy = fresh_plugin()
    copy.enable()
    posix = scons.modules['SCons.Platform.posix']
    assert posix.exec_subprocess(['sh', '-c', 'exit 3'], {}) == 'stock'
    assert posix.exec_subprocess is stock_exec
    assert capfd.readouterr().err.count('warning') == 1
