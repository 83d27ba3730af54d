"""Fixtures for the end-to-end SCons tests; the helpers live in scons_e2e.py."""

import pytest

from scons_e2e import Project, module_problem


@pytest.fixture
def pool_module():
    """Skip (saying why) when the real spawnpool module is not built; fail if it is built
    but broken."""
    skip, failure = module_problem()
    if skip:
        pytest.skip(skip)
    if failure:
        pytest.fail(failure)


@pytest.fixture
def projects(tmp_path):
    """Two copies of the project: (stock, pool)."""
    return (Project(tmp_path / 'stock' / 'proj', tmp_path / 'stock' / 'home'),
            Project(tmp_path / 'pool' / 'proj', tmp_path / 'pool' / 'home'))


@pytest.fixture
def project(tmp_path):
    return Project(tmp_path / 'proj', tmp_path / 'home')
