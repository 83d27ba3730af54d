"""The plugin's PSPAWN stream handling and error reporting, in-process with a fake pool.

These need neither the built module nor a scons run; the rest of the directory checks
the real thing end to end.
"""

import io
import os
import sys

import pytest

from scons_e2e import PLUGIN_DIR

SCons = pytest.importorskip('SCons.Platform.posix', reason='SCons is not importable here')
sys.path.insert(0, str(PLUGIN_DIR))
import spawnpool_scons as plugin  # noqa: E402


class FakeError(OSError):
    def __init__(self, errno_, msg, stage):
        super().__init__(errno_, msg)
        self.stage = stage


class FakeDied(FakeError):
    pass


class Result:
    def __init__(self, returncode, stdout=None, stderr=None):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


class FakePool:
    def __init__(self, result=None, error=None):
        self.result, self.error, self.calls = result, error, []

    def run(self, argv, env=None, cwd=None, capture=False, merge_stderr=False):
        self.calls.append(dict(argv=argv, env=env, cwd=cwd, capture=capture,
                               merge_stderr=merge_stderr))
        if self.error:
            raise self.error
        return self.result


@pytest.fixture
def fake(monkeypatch):
    """Installs a FakePool as the plugin's live pool; yields a setter."""
    import SCons.Platform.posix as posix
    monkeypatch.setattr(plugin, '_posix', posix)
    monkeypatch.setattr(plugin, '_SpawnError', FakeError)
    monkeypatch.setattr(plugin, '_SpawnerDied', FakeDied)
    monkeypatch.setattr(plugin, '_resize_wanted', False)
    monkeypatch.setattr(plugin, '_inflight', 0)

    def use(pool):
        monkeypatch.setattr(plugin, '_pool', pool)
        return pool
    return use


ARGV = ['sh', '-c', 'gcc -c x.c']
ENV = {'PATH': '/usr/bin:/bin'}


def test_spawn_passes_argv_env_and_current_cwd(fake):
    pool = fake(FakePool(Result(7)))
    assert plugin._pool_exec_subprocess(ARGV, ENV) == 7
    assert pool.calls == [dict(argv=ARGV, env=ENV, cwd=os.getcwd(), capture=False,
                               merge_stderr=False)]
    assert plugin._inflight == 0


def test_pspawn_same_stream_is_merged_and_written_to_its_fd(fake, tmp_path):
    pool = fake(FakePool(Result(1, b'out and err\n', None)))
    with open(tmp_path / 'log', 'w') as log:
        log.write('before\n')           # still in the Python buffer: must come first
        assert plugin._pool_exec_popen3(ARGV, ENV, log, log) == 1
        log.write('after\n')
    assert (tmp_path / 'log').read_text() == 'before\nout and err\nafter\n'
    assert pool.calls[0]['capture'] and pool.calls[0]['merge_stderr']


def test_pspawn_separate_streams_and_no_fileno(fake):
    fake(FakePool(Result(0, b'to out\n', 'to err \xe9\n'.encode())))
    out, err = io.StringIO(), io.StringIO()
    assert plugin._pool_exec_popen3(ARGV, ENV, out, err) == 0
    assert out.getvalue() == 'to out\n'
    assert err.getvalue() == 'to err \xe9\n'


def test_pspawn_without_streams_is_passthrough(fake):
    pool = fake(FakePool(Result(0)))
    assert plugin._pool_exec_popen3(ARGV, ENV, None, None) == 0
    assert pool.calls[0]['capture'] is False


@pytest.mark.parametrize('error, words', [
    (FakeDied(32, 'the spawner process died while running the command', 'spawner'),
     ': the spawner process died while running the command; '),
    (FakeError(2, "cannot enter working directory '/gone'", 'chdir'), '(stage chdir)'),
    (FakeError(22, 'bad request', 'request'), 'bad request (stage request)'),
])
def test_spawn_errors_become_one_line_and_error_2(fake, capfd, tmp_path, error, words):
    fake(FakePool(error=error))
    assert plugin._pool_exec_subprocess(ARGV, ENV) == 2
    with open(tmp_path / 'log', 'w') as log:
        assert plugin._pool_exec_popen3(ARGV, ENV, log, log) == 2
    err = capfd.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], err
    assert lines[0].startswith('scons: *** --process-spawner: ') and words in lines[0], err
    assert lines[0].endswith('; command: gcc -c x.c')
    assert (tmp_path / 'log').read_text() == lines[0] + '\n'   # and in config.log
    assert plugin._inflight == 0


@pytest.mark.parametrize('error', [
    FakeError(2, "cannot execute 'sh': No such file or directory", 'exec'),
    FakeError(7, 'argument 2 is 140005 bytes; exec accepts at most 131071', 'request'),
])
def test_exec_failures_raise_what_stock_popen_raises(fake, error):
    # SCons turns these into "scons: *** [target] sh: <strerror>", as with stock.
    fake(FakePool(error=error))
    with pytest.raises(OSError) as info:
        plugin._pool_exec_subprocess(ARGV, ENV)
    assert type(info.value) is not FakeError
    assert (info.value.errno, info.value.strerror, info.value.filename) == (
        error.errno, os.strerror(error.errno), 'sh')
    assert plugin._inflight == 0
