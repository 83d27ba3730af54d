"""Fixtures for the distributed-build tests; the helpers live in dist_support.py."""

import os

import pytest

from dist_support import Distccd, LeakCheck, MARKER, distcc_problem, module_problem


@pytest.fixture
def pool_module():
    """Skip (saying why) when the spawnpool module is not built; fail if it is broken."""
    skip, failure = module_problem()
    if skip:
        pytest.skip(skip)
    if failure:
        pytest.fail(failure)


@pytest.fixture
def no_leaks(monkeypatch):
    """For a test that starts a pool in this process: it leaves no fd, child, process,
    segment (tests/python/spawnpool_test_support.py, LeakCheck)."""
    monkeypatch.setenv(MARKER, str(os.getpid()))
    check = LeakCheck()
    yield
    problems = check.problems()
    assert not problems, '\n'.join(problems)


@pytest.fixture(scope='module')
def distccd():
    """A distccd on 127.0.0.1 for the tests of one module; stopped by its pid."""
    problem = distcc_problem()
    if problem:
        pytest.skip(problem)
    daemon = Distccd()
    try:
        yield daemon.start()
    finally:
        daemon.stop()
