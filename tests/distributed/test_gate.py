"""The Gate layer (the engine's launcher layer, bound) on the shared FakeRunner: the
launcher's rewriting, which commands count as local, messages, counts.  What the pool does with `Command.local` (the local slots),
make's tokens and interrupts: test_admission.py and test_jobserver.py."""

import pytest

from dist_support import module_problem, run_on_threads

_skip, _failure = module_problem()
if _skip:
    pytest.skip(_skip, allow_module_level=True)

from spawnpool import CAPTURE_MERGED, Command, Result  # noqa: E402
from spawnpool.gate import Gate  # noqa: E402
from spawnpool.launcher import Launcher  # noqa: E402
from spawnpool.testing import FakeRunner, RecordingPrinter  # noqa: E402


def fake(seconds=0.0, answer=None):
    """Runs nothing; counts launched and local commands that ran at once."""
    return FakeRunner(answer, seconds,
                      kind=lambda c: 'launched' if 'distcc' in c.argv[-1] else 'local')


def sh(line, env=None, output='passthrough'):
    return Command(['sh', '-c', line], env if env is not None else {}, '/', output)


def run_threads(gate, lines):
    results = run_on_threads(gate, [sh(line, {'PATH': '/usr/bin:/bin'}) for line in lines])
    return [r.returncode for r in results]


def test_launched_compiles_are_not_local():
    """The pool's local slots bound the commands submitted with Command.local: every
    command but a compile the launcher runs (counted as remote)."""
    runner = fake(seconds=0.05)
    gate = Gate(runner, Launcher('distcc', path='/usr/bin:/bin'))
    lines = ['ar rc lib%d.a x.o' % i for i in range(3)] + \
            ['gcc -c f%d.c -o f%d.o' % (i, i) for i in range(3)]
    assert run_threads(gate, lines) == [0] * 6
    local = {c.argv[-1]: c.local for c in runner.commands}
    assert sorted(line for line, is_local in local.items() if is_local) == sorted(lines[:3])
    assert gate.launched == 3 and gate.local_commands == 3


def test_launcher_rewrites_compiles_and_adds_driver_env(monkeypatch):
    monkeypatch.setenv('DISTCC_HOSTS', 'somehost')
    monkeypatch.setenv('HOME', '/home/someone')
    runner = fake()
    gate = Gate(runner, Launcher('distcc', path='/usr/bin:/bin'))
    env = {'PATH': '/usr/bin:/bin'}
    assert gate.run(sh('gcc -o a.o -c a.c', env)).returncode == 0
    assert gate.run(sh('gcc -o prog a.o', env)).returncode == 0
    compile_, link = runner.commands
    assert compile_.argv == ['sh', '-c', gate.launcher.prefix + ' gcc -o a.o -c a.c']
    assert compile_.env['DISTCC_HOSTS'] == 'somehost'
    assert compile_.env['HOME'] == '/home/someone'
    assert compile_.output != 'passthrough'     # distcc: captured to spot fallbacks
    assert link.argv == ['sh', '-c', 'gcc -o prog a.o'] and link.env == env
    assert link.output == 'passthrough'
    assert env == {'PATH': '/usr/bin:/bin'}


def test_launcher_failure_is_named(capfd):
    runner = fake(answer=Result(returncode=116, stdout=b'', stderr=b'distcc[1] ERROR: x\n'))
    gate = Gate(runner, Launcher('distcc', path='/usr/bin:/bin'))
    assert gate.run(sh('gcc -c a.c')).returncode == 116
    out, err = capfd.readouterr()
    assert 'distcc[1] ERROR: x\n' in err    # the command's own output, then ours
    assert err.endswith('spawnpool: distcc failed to distribute (exit 116) for: '
                        'gcc -c a.c\n')
    assert gate.launcher_failed == 1


def test_fallbacks_counted():
    warning = (b'distcc[9] (dcc_build_somewhere) Warning: failed to distribute, '
               b'running locally instead\n')
    results = iter([Result(returncode=0, stderr=warning), Result(returncode=0)])
    gate = Gate(fake(answer=lambda command: next(results)),
                Launcher('distcc', path='/usr/bin:/bin'))
    gate.run(sh('gcc -c a.c'))
    gate.run(sh('gcc -c b.c'))
    assert (gate.launched, gate.ran_locally, gate.launcher_failed) == (2, 1, 0)
    summary = '\n'.join(gate.summary())
    assert '2 compiles through distcc, 1 of them compiled locally' in summary


def test_caller_that_captures_gets_the_output(capfd):
    warning = b'distcc[9] Warning: failed to distribute, running locally instead\n'
    runner = fake(answer=Result(returncode=0, stdout=warning))
    gate = Gate(runner, Launcher('distcc', path='/usr/bin:/bin'))
    result = gate.run(sh('gcc -c a.c', output=CAPTURE_MERGED))
    assert (result.returncode, result.stdout) == (0, warning)
    assert runner.commands[0].output == CAPTURE_MERGED
    assert capfd.readouterr() == ('', '')   # the caller prints it, not the gate
    assert gate.ran_locally == 1


def test_messages_go_through_the_package_console():
    """The engine's launcher layer prints its block and its message through output_sync
    (the status line's printer while it owns the console), not past it onto the fds."""
    from spawnpool import output_sync

    printer = RecordingPrinter()
    runner = fake(answer=Result(returncode=116, stdout=b'o\n', stderr=b'e\n'))
    gate = Gate(runner, Launcher('distcc', path='/usr/bin:/bin'))
    output_sync.set_console_printer(printer)
    try:
        gate.run(sh('gcc -c a.c'))
    finally:
        output_sync.set_console_printer(None)
    assert printer.writes[:2] == [(1, b'o\n'), (2, b'e\n')]
    assert printer.writes[2][0] == 2 and b'distcc failed to distribute' in printer.writes[2][1]
