"""Each SCons release x CPython cell of the matrix runs its suite against that SCons (see
compat_matrix.py); a cell whose release or interpreter is absent is skipped with the reason.

    PYTHONPATH=build/python:scons_plugin /usr/bin/python3 -m pytest tests/compat

SPAWNPOOL_SKIP_MATRIX=1 leaves the cells out (the other compat tests still run).
"""

import os

import pytest

import compat_matrix as matrix

SKIP = os.environ.get('SPAWNPOOL_SKIP_MATRIX') == '1'


@pytest.mark.skipif(SKIP, reason='SPAWNPOOL_SKIP_MATRIX=1')
@pytest.mark.parametrize('cell', matrix.cells(), ids=lambda c: c.id)
def test_cell(matrix_runner, cell):
    outcome = matrix_runner.result(cell)
    if outcome.status == 'skipped':
        pytest.skip(outcome.detail)
    assert outcome.status == 'passed', 'SCons %s on CPython %s (%s suite): %s' % (
        cell.release, cell.python, cell.kind, outcome.detail)
