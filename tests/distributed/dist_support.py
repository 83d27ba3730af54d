"""Helpers for the distributed-build tests: a private distccd, generated trees, probes.

Every scons/make run goes through ``timeout -s KILL`` in a new session (scons_e2e's
run_session), with a private HOME.  The distccd daemon listens on 127.0.0.1 only, on a
free port, and is stopped by the pid it wrote (never by name).

    PYTHONPATH=build/python:scons_plugin /usr/bin/python3 -m pytest tests/distributed

Not named conftest.py: the test modules import it by name.
"""

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'scons'))
sys.path.insert(0, str(HERE.parent / 'python'))
import scons_e2e  # noqa: E402  (the SCons suite's helpers: sessions, leak checks)
from spawnpool_test_support import LeakCheck, MARKER  # noqa: E402,F401  (a pool's leaks)
from scons_e2e import (MODULE_DIR, PLUGIN_DIR, REPO, SCONS, SITE_DIR,  # noqa: E402,F401
                       SYSTEM_PYTHON, base_env, kill_session, module_problem,
                       wait_session_empty)

GENSCONS = REPO / 'bench_projects' / 'genscons.py'
VERIFY = REPO / 'bench_projects' / 'verify_outputs.py'
DISTCC = shutil.which('distcc')
DISTCCD = shutil.which('distccd') or (os.path.exists('/usr/sbin/distccd') and '/usr/sbin/distccd')
TIMEOUT = 240           # seconds for one build, enforced by timeout -s KILL as well


class Finished:
    def __init__(self, argv, returncode, stdout, stderr):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout.decode('utf-8', 'replace')
        self.stderr = stderr.decode('utf-8', 'replace')

    def __repr__(self):
        return '<%s rc=%s\n--- stdout\n%s--- stderr\n%s>' % (
            ' '.join(map(str, self.argv)), self.returncode, self.stdout, self.stderr)


def run(argv, cwd, env, timeout=TIMEOUT, check_leaks=True):
    """Run argv under `timeout -s KILL` in a new session; fail on leftovers."""
    full = ['timeout', '-s', 'KILL', str(timeout)] + [str(a) for a in argv]
    rc, out, err, sid = scons_e2e.run_session(full, cwd, env, timeout + 10)
    result = Finished(argv, rc, out, err)
    if check_leaks:
        left = wait_session_empty(sid)
        if left:
            info = scons_e2e.describe_pids(left)
            kill_session(sid)
            pytest.fail('processes left behind by %r:\n%s' % (result, info))
    return result


def scons_argv(*args, pool=True):
    if pool:
        return [SCONS, '--site-dir=%s' % SITE_DIR, '--process-spawner'] + list(args)
    return [SCONS] + list(args)


def build_env(home, pool=True, **extra):
    """The environment for a scons or make run: none of the caller's launcher or make
    variables, a private HOME, and a TMPDIR in it (what a killed distcc client or compiler
    leaves, a distcc_*.i or a cc*.s, goes with the test's directory, not into /tmp), the
    plugin on PYTHONPATH for pool runs, then `extra`."""
    temp = Path(home) / 'tmp'
    temp.mkdir(parents=True, exist_ok=True)
    env = base_env(HOME=str(home), TMPDIR=str(temp))
    for name in list(env):
        if name.startswith(('DISTCC_', 'CCACHE_', 'ICECC_', 'MAKEFLAGS', 'MFLAGS',
                            'MAKELEVEL')):
            del env[name]
    if pool:
        env['PYTHONPATH'] = os.pathsep.join(map(str, (MODULE_DIR, PLUGIN_DIR)))
    env.update(extra)
    return env


def generate_tree(out, preset='small'):
    subprocess.run([SYSTEM_PYTHON, str(GENSCONS), '--preset', preset, '--out', str(out)],
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    return Path(out)


def verify(tree, *roots):
    r = subprocess.run([SYSTEM_PYTHON, str(VERIFY), str(tree)] + [str(x) for x in roots],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def files(root, suffixes):
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob('*'))
            if p.is_file() and p.suffix in suffixes}


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def distcc_problem():
    """Why distcc tests cannot run here, or None."""
    if not DISTCC or not DISTCCD:
        return 'distcc is not installed (./scripts/setup installs it)'
    if not os.path.exists('/usr/lib/distcc/gcc'):
        return 'gcc is not in /usr/lib/distcc, so distccd would refuse to run it'
    return None


class Distccd:
    """A distccd on 127.0.0.1:<free port>.  As root it drops to user distccd, which
    must reach its pid and log files: they live in a world-writable directory directly
    in /tmp (pytest's tmp_path is under a 0700 directory)."""

    def __init__(self, jobs=4):
        self.jobs = jobs
        self.dir = Path(tempfile.mkdtemp(prefix='spawnpool-distccd-'))
        self.dir.chmod(0o1777)
        self.log = self.dir / 'distccd.log'
        self.pid_file = self.dir / 'distccd.pid'
        self.log.touch()
        self.log.chmod(0o666)
        self.port = free_port()
        self.pid = None

    def start(self):
        argv = [DISTCCD, '--daemon', '--allow', '127.0.0.1', '--listen', '127.0.0.1',
                '--port', str(self.port), '--log-file', str(self.log),
                '--pid-file', str(self.pid_file), '--verbose', '--jobs', str(self.jobs)]
        # Its temporary files in its own directory, which stop() removes.
        subprocess.run(argv, check=True, timeout=30, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, TMPDIR=str(self.dir)))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.pid is None and self.pid_file.exists():
                text = self.pid_file.read_text().strip()
                self.pid = int(text) if text.isdigit() else None
            if self.pid is not None and self._listening():
                return self
            time.sleep(0.05)
        log = self.log.read_text(errors='replace')
        self.stop()
        pytest.fail('distccd did not start; log:\n%s' % log)

    def _listening(self):
        try:
            with socket.create_connection(('127.0.0.1', self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self):
        """SIGTERM to the daemon's pid (its children follow), then SIGKILL its group.

        Without a pid file (distccd could not write it) the daemon is found by its
        command line, which names our private pid file: still one pid, never a name."""
        pid = self.pid or self._find_pid()
        self.pid = None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pid = None
        if pid is not None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _group_alive(pid):
                time.sleep(0.05)
            if _group_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)      # distccd leads its own group
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def _find_pid(self):
        """The daemon parent: the process whose command line names our pid file and
        whose parent does not."""
        mine = {}
        needle = str(self.pid_file).encode()
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                with open('/proc/%s/cmdline' % entry, 'rb') as f:
                    if needle not in f.read().split(b'\0'):
                        continue
                with open('/proc/%s/stat' % entry, 'rb') as f:
                    data = f.read()
            except OSError:
                continue
            mine[int(entry)] = int(data[data.rindex(b')') + 2:].split()[1])
        roots = [pid for pid, ppid in mine.items() if ppid not in mine]
        return roots[0] if roots else None

    def compiles_ok(self):
        """How many compiles the daemon logged as COMPILE_OK."""
        return self.log.read_text(errors='replace').count('COMPILE_OK')

    def client_env(self, distcc_dir, fallback=False):
        Path(distcc_dir).mkdir(parents=True, exist_ok=True)
        return {'DISTCC_HOSTS': '127.0.0.1:%d/%d' % (self.port, self.jobs),
                'DISTCC_FALLBACK': '1' if fallback else '0',
                'DISTCC_DIR': str(distcc_dir)}


def _group_alive(pgid):
    return bool(scons_e2e.session_members(pgid)) or os.path.exists('/proc/%d' % pgid)


# --- concurrency probes ------------------------------------------------------------------

PROBE = '''#!/bin/sh
# probe.sh LOG KIND OUT: note the start and end of this command (pid, ns), make OUT
echo "start $2 $$ $(date +%s%N)" >> "$1"
sleep 0.3
echo "end $2 $$ $(date +%s%N)" >> "$1"
echo done > "$3"
'''

LAUNCHER = '''#!/bin/sh
# slow_launcher.sh COMPILER ARGS...: note the compile's start and end, run it
log="$SPAWNPOOL_TEST_LOG"
echo "start launched $$ $(date +%s%N)" >> "$log"
sleep 0.3
"$@"
status=$?
echo "end launched $$ $(date +%s%N)" >> "$log"
exit $status
'''


def run_on_threads(runner, commands, timeout=60):
    """runner.run(command) for each command, each on a thread of its own, all at once;
    their Results, in order."""
    results = {}

    def one(i, command):
        results[i] = runner.run(command)

    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(commands)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), 'a command never came back'
    return [results[i] for i in range(len(commands))]


def write_script(path, text):
    path = Path(path)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def max_concurrency(log, kind=None):
    """The most probes of `kind` (None: any) that were running at one time, and how many."""
    events = []
    for line in Path(log).read_text().splitlines():
        what, probe_kind, _pid, ns = line.split()
        if kind is None or probe_kind == kind:
            events.append((int(ns), what == 'start'))
    return _most_running(events), len(events) // 2


def most_ran_at_once(results):
    """The most of these pool Results whose commands ran at one time (started_ns to
    exited_ns, CLOCK_MONOTONIC); a command that never started counts not."""
    events = []
    for r in results:
        if r.started_ns:
            events += [(r.started_ns, True), (r.exited_ns, False)]
    return _most_running(events)


def _most_running(events):
    """The most running at once, from (ns, is_start) events."""
    running = most = 0
    for _, starts in sorted(events):    # at equal times an end sorts first: back-to-back
        running += 1 if starts else -1  # is not overlap
        most = max(most, running)
    return most


class CommandSampler:
    """Samples, every few ms, how many commands the pool's spawners are running: children
    of processes named spawnpool-spawner in one session."""

    def __init__(self, sid):
        self.sid = sid
        self.most = 0
        self.samples = 0

    def sample(self):
        procs = {}
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % entry, 'rb') as f:
                    data = f.read()
            except OSError:
                continue
            name = data[data.index(b'(') + 1:data.rindex(b')')]
            fields = data[data.rindex(b')') + 2:].split()
            if fields[0] == b'Z' or int(fields[3]) != self.sid:
                continue
            procs[int(entry)] = (name, int(fields[1]))
        spawners = {pid for pid, (name, _) in procs.items()
                    if name.startswith(b'spawnpool-spaw')}
        running = sum(1 for pid, (_, ppid) in procs.items() if ppid in spawners)
        self.most = max(self.most, running)
        self.samples += 1
