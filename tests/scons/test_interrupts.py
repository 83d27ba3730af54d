"""Ctrl-C and SIGTERM while a command runs: SCons stops, the commands go away."""

import os
import signal
import subprocess
import time

import pytest

from scons_e2e import TIMEOUT, Run, kill_session, wait_session_empty

# The 'sleeper' target writes its shell's pid to sleeper.pid, then sleeps 60 s.
PATIENCE = 30       # an interrupted build must end well before the sleep would


def start_sleeper(project, pool, jobs):
    """Start `scons sleeper` in a new session; return (proc, shell pid) once it sleeps."""
    pid_file = project.root / 'sleeper.pid'
    proc = subprocess.Popen(project.argv(['-Q', jobs, 'sleeper'], pool),
                            cwd=project.root, env=project.env(pool),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        text = pid_file.read_text().strip() if pid_file.exists() else ''
        if text.isdigit():
            time.sleep(0.2)     # let the shell get into `sleep`
            return proc, int(text)
        time.sleep(0.05)
    kill_session(proc.pid)
    out, err = proc.communicate()
    pytest.fail('the sleeper command did not start:\n%s\n%s' % (out, err))


def finish(project, proc):
    """Wait for scons (bounded), check nothing of its session survives, return a Run."""
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=PATIENCE)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        out, err = proc.communicate()
        pytest.fail('scons did not stop within %ss of the signal:\n%s\n%s'
                    % (PATIENCE, out.decode(errors='replace'), err.decode(errors='replace')))
    elapsed = time.monotonic() - t0
    left = wait_session_empty(proc.pid)
    kill_session(proc.pid)
    assert not left, 'processes survived the interrupted build: %s' % left
    return Run(['sleeper'], proc.returncode, out, err, project.root), elapsed


@pytest.mark.parametrize('jobs', ['-j1', '-j2'])
def test_ctrl_c_matches_stock(pool_module, projects, jobs):
    # Ctrl-C: the terminal sends SIGINT to the foreground process group, i.e. scons and
    # (under the pool) its spawners, which pass it on to their commands' groups.
    runs = []
    for project, pool in zip(projects, (False, True)):
        proc, _ = start_sleeper(project, pool, jobs)
        os.killpg(proc.pid, signal.SIGINT)
        runs.append(finish(project, proc)[0])
    stock, pool = runs
    assert stock.returncode == 2, stock
    assert pool.returncode == stock.returncode, (stock, pool)
    assert pool.stdout == stock.stdout, (stock, pool)
    assert pool.stderr == stock.stderr, (stock, pool)


@pytest.mark.parametrize('jobs, signum', [('-j1', signal.SIGTERM), ('-j2', signal.SIGTERM),
                                           ('-j2', signal.SIGHUP)])
def test_sigterm_to_scons_alone_cancels_commands(pool_module, project, jobs, signum):
    # Stock SCons would wait for the 60 s command (it sits in SCons' process group and
    # kill(scons_pid) does not reach it); with the pool, SCons' SIGTERM handler is chained
    # with pool.cancel(signum).  Same for SIGHUP.
    proc, shell = start_sleeper(project, True, jobs)
    os.kill(proc.pid, signum)
    run, elapsed = finish(project, proc)
    assert run.returncode == 2, run
    assert 'Build interrupted' in run.stderr, run
    assert 'Traceback' not in run.stderr, run
    assert not os.path.exists('/proc/%d' % shell), 'the command is still running'
    assert not (project.root / 'sleeper.txt').exists()


def test_interactive_build_after_ctrl_c_runs_its_commands(pool_module, projects):
    # `scons --interactive`: Ctrl-C stops the build at the prompt's command, and SCons
    # asks for the next one. The pool's interrupt (its scheduler's, the stop signal its
    # spawners noted) is for that build only: the next build runs its commands, as stock.
    for project, pool in zip(projects, (False, True)):
        with open(project.root / 'SConstruct', 'a') as f:
            f.write("env.Alias('after', env.Command('after.txt', [], 'echo after > $TARGET'))\n")
        pid_file = project.root / 'sleeper.pid'
        proc = subprocess.Popen(project.argv(['-Q', '-j2', '--interactive'], pool),
                                cwd=project.root, env=project.env(pool),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            proc.stdin.write(b'build sleeper\n')
            proc.stdin.flush()
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline and not (
                    pid_file.exists() and pid_file.read_text().strip().isdigit()):
                time.sleep(0.05)
            time.sleep(0.2)         # let the shell get into `sleep`
            os.killpg(proc.pid, signal.SIGINT)
            # Read once the interrupted build is over, as a user types the next command.
            out, err = proc.communicate(b'build after\nexit\n', timeout=PATIENCE)
        finally:
            left = wait_session_empty(proc.pid)
            kill_session(proc.pid)
        assert not left, left
        assert (project.root / 'after.txt').read_text() == 'after\n', (pool, out, err)
        assert b'Build interrupted' in err or b'Error -2' in err, (pool, err)
