"""Fixtures of the compatibility matrix: the SCons releases unpacked once per session, and
the matrix runner, which runs the cells' suites (SPAWNPOOL_MATRIX_JOBS at a time, default
2) as soon as the session starts; each cell's test waits for its own result. The matrix is
printed at the end of the session."""

import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import compat_matrix as matrix

JOBS = max(1, int(os.environ.get('SPAWNPOOL_MATRIX_JOBS') or 2))
CELL_TIMEOUT = 1800     # seconds for one cell's suite (inner runs have their own timeouts)


@pytest.fixture(scope='session')
def work_dir():
    """A temp dir for the session (releases, wrappers, inner pytest temp dirs), removed
    at the end."""
    path = Path(tempfile.mkdtemp(prefix='spawnpool-compat-'))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Releases:
    """Unpacks each release once, on first use (thread-safe: the runner's threads ask)."""

    def __init__(self, root):
        self.root = Path(root) / 'releases'
        self.lock = threading.Lock()
        self.done = {}

    def get(self, release):
        with self.lock:
            if release not in self.done:
                self.done[release] = matrix.unpack(release, self.root)
            return self.done[release]

    def scons(self, release, python, flags=()):
        """A `scons` command for `release` under `python` with `flags` (made once)."""
        root = self.get(release)
        tag = os.path.basename(os.path.dirname(os.path.dirname(python))) or 'python'
        tag += ''.join('-' + f.split('=')[-1] for f in flags)
        bin_dir = self.root / 'bin' / ('%s-%s' % (release, tag))
        with self.lock:
            if not (bin_dir / 'scons').exists():
                matrix.scons_command(root, python, bin_dir, flags)
        return bin_dir / 'scons'


@pytest.fixture(scope='session')
def releases(work_dir):
    return Releases(work_dir)


class Outcome:
    def __init__(self, status, detail='', seconds=0.0, summary=''):
        self.status, self.detail, self.seconds, self.summary = status, detail, seconds, summary


def problem(cell):
    return matrix.release_problem(cell.release) or matrix.python_problem(cell)


def run_cell(cell, releases, work_dir):
    """Run the cell's suite in its own pytest session; an Outcome."""
    why = problem(cell)
    if why:
        return Outcome('skipped', why)
    python = matrix.interpreter(cell)
    scons = releases.scons(cell.release, python, cell.flags)
    temp = work_dir / 'cells' / cell.id
    temp.mkdir(parents=True)
    log = temp.parent / (cell.id + '.log')
    env = matrix.scons_e2e.base_env(
        SPAWNPOOL_TEST_SCONS=str(scons), SPAWNPOOL_TEST_SCONS_PYTHON=python,
        SPAWNPOOL_TEST_SCONS_SCHEDULER=cell.scheduler,
        PYTHONPATH=os.pathsep.join(map(str, (matrix.scons_e2e.MODULE_DIR,
                                             matrix.scons_e2e.PLUGIN_DIR))))
    argv = [matrix.SYSTEM_PYTHON, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-rfEs',
            '--basetemp', str(temp / 'pytest')] + cell.suite
    start = time.monotonic()
    with open(log, 'wb') as out:
        try:
            rc = subprocess.run(argv, cwd=matrix.REPO, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT,
                                timeout=CELL_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            rc = 'timeout'
    seconds = time.monotonic() - start
    text = log.read_text(errors='replace')
    shutil.rmtree(temp, ignore_errors=True)
    lines = text.strip().splitlines()
    summary = lines[-1].strip('= ') if lines else ''
    if rc == 0:
        return Outcome('passed', seconds=seconds, summary=summary)
    return Outcome('failed', 'exit %s; %s:\n%s' % (rc, ' '.join(cell.suite), text[-12000:]),
                   seconds, summary)


class Runner:
    """Starts every selected cell at once on JOBS threads; result(cell) waits for one."""

    def __init__(self, cells, releases, work_dir):
        self.started = time.monotonic()
        self.pool = ThreadPoolExecutor(max_workers=JOBS)
        self.futures = {c.id: self.pool.submit(run_cell, c, releases, work_dir) for c in cells}
        self.outcomes = {}
        self.finished = None

    def result(self, cell):
        outcome = self.futures[cell.id].result()
        self.outcomes[cell.id] = (cell, outcome)
        if all(f.done() for f in self.futures.values()) and self.finished is None:
            self.finished = time.monotonic()
        return outcome

    def close(self):
        for future in self.futures.values():
            future.cancel()
        self.pool.shutdown(wait=True)


_runner = None


@pytest.fixture(scope='session')
def matrix_runner(request, releases, work_dir):
    """The runner for the cells this session selected (test_matrix.py's items)."""
    global _runner
    selected = []
    for item in request.session.items:
        cell = getattr(item, 'callspec', None) and item.callspec.params.get('cell')
        if isinstance(cell, matrix.Cell):
            selected.append(cell)
    _runner = Runner(selected, releases, work_dir)
    try:
        yield _runner
    finally:
        _runner.close()


def pytest_terminal_summary(terminalreporter):
    if not _runner or not _runner.outcomes:
        return
    write = terminalreporter.write_line
    end = _runner.finished or time.monotonic()
    write('')
    write('SCons x CPython matrix (%d cells, %d at a time, %.0f s):'
          % (len(_runner.outcomes), JOBS, end - _runner.started))
    width = max(len(cell.row) for cell, _ in _runner.outcomes.values())
    for cell, outcome in sorted(_runner.outcomes.values(),
                                key=lambda co: (matrix.RELEASES.index(co[0].release),
                                                matrix.PYTHONS.index(co[0].python), co[0].kind)):
        python = matrix.interpreter(cell) or 'CPython %s' % cell.python
        text = '  SCons %-*s  %-4s %-5s %-8s' % (width, cell.row, cell.python, cell.kind,
                                                outcome.status)
        if outcome.status == 'skipped':
            text += ' ' + outcome.detail
        else:
            text += ' %4.0f s  %s  (%s)' % (outcome.seconds, outcome.summary, python)
        write(text)
    left_out = {t: why for cell, _ in _runner.outcomes.values() for t, why in
                cell.deselected.items() if '--deselect=' + t in cell.suite}
    for test, why in sorted(left_out.items()):
        write('  left out of the NewParallel cells: %s: %s' % (test, why))
