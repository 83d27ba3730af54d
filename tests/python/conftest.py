"""Fixtures for the spawnpool module tests: leak checks around every test.

Run as: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python
Every test here is checked afterwards for leaks (the ``no_leaks`` fixture, autouse):
the same open fds, the same child processes (this pytest process may have children
from elsewhere; a test must not add any, zombie or alive), no process left that carries
the test's marker variable (spawners and commands run with the driver's environment
inherit it), no pool segment left here (no descriptor or mapping of the memfd
/memfd:spawnpool-segment), and no /dev/shm/spawnpool-* entry appearing.
"""

import os

import pytest

from spawnpool_test_support import MARKER, LeakCheck


@pytest.fixture(autouse=True)
def no_leaks(monkeypatch):
    monkeypatch.setenv(MARKER, str(os.getpid()))
    check = LeakCheck()
    yield
    problems = check.problems()
    assert not problems, "\n".join(problems)
