"""The package under test is the build tree's copy of engine/python/spawnpool, whole and
with nothing more: a module deleted from the sources must not stay importable from
build/python (a stale copy would let a broken import pass here and fail on a fresh clone)."""

import os

import pytest

import spawnpool

SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'engine',
                       'python', 'spawnpool')


def _modules(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith('.py'))


def test_the_built_package_has_exactly_the_sources_modules():
    built = os.path.dirname(os.path.abspath(spawnpool.__file__))
    if os.path.samefile(built, SOURCES):
        pytest.skip('spawnpool is imported from its sources, not from a build tree')
    assert _modules(built) == _modules(SOURCES)
