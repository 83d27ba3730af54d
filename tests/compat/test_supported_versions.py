"""scons_plugin/README.md's "Supported versions" table says what the matrix runs: the same
cells, each with the same kind of run (full, core). Needs neither SCons nor pyenv."""

import re
import subprocess

import pytest

import compat_matrix as matrix

README = matrix.REPO / 'scons_plugin' / 'README.md'
KINDS = ('full', 'core')


def readme_table():
    """{(row, python): {kinds}} from the first table of the "Supported versions" section."""
    text = README.read_text()
    section = re.search(r'^## Supported versions\n(.*?)(?=^## |\Z)', text, re.M | re.S)
    assert section, '%s has no "## Supported versions" section' % README
    lines = [l.strip() for l in section.group(1).splitlines()]
    start = next(i for i, l in enumerate(lines) if l.startswith('| SCons |'))
    rows = []
    for line in lines[start:]:
        if not line.startswith('|'):
            break
        rows.append([c.strip() for c in line.strip('|').split('|')])
    header, body = rows[0], rows[2:]
    pythons = header[1:]
    grid = {}
    for row in body:
        label = row[0]
        release = matrix.DEBIAN if 'Debian' in label else label.replace('`', '').strip()
        for python, cell in zip(pythons, row[1:]):
            kinds = {k.strip() for k in cell.split(',')} - {'·', ''}
            unknown = kinds - set(KINDS)
            assert not unknown, 'row %r, CPython %s: unknown entries %s' % (label, python,
                                                                            unknown)
            if kinds:
                grid[(release, python)] = kinds
    return pythons, grid


def test_columns_are_the_matrix_pythons():
    pythons, _ = readme_table()
    assert tuple(pythons) == matrix.PYTHONS


def test_table_matches_the_matrix():
    _, documented = readme_table()
    tested = matrix.table()
    missing = sorted('%s on %s: %s' % (r, p, ', '.join(sorted(k)))
                     for (r, p), k in tested.items() if documented.get((r, p)) != k)
    extra = sorted('%s on %s: %s' % (r, p, ', '.join(sorted(k)))
                   for (r, p), k in documented.items() if (r, p) not in tested)
    assert not missing and not extra, (
        'scons_plugin/README.md and tests/compat/compat_matrix.py disagree.\n'
        'The matrix runs (README says otherwise): %s\nREADME claims (the matrix does not '
        'run): %s' % (missing, extra))


def test_every_release_has_a_row():
    _, documented = readme_table()
    rows = {r for r, _ in documented}
    assert set(matrix.RELEASES) | {matrix.DEBIAN} <= rows, rows


def test_system_python_is_the_full_column():
    """The full cells run on /usr/bin/python3, which the table puts under 3.11 (skipped
    on a machine whose /usr/bin/python3 is another version)."""
    r = subprocess.run([matrix.SYSTEM_PYTHON, '-c', 'import sys; print("%d.%d" % '
                        'sys.version_info[:2])'], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip('%s does not run' % matrix.SYSTEM_PYTHON)
    if r.stdout.strip() != matrix.SYSTEM_PYTHON_VERSION:
        pytest.skip('%s is %s here; the table is for %s' % (
            matrix.SYSTEM_PYTHON, r.stdout.strip(), matrix.SYSTEM_PYTHON_VERSION))


def test_debian_scons_is_the_release_without_a_full_cell():
    """The matrix leaves out the full cell of DEBIAN_RELEASE because the regular suites run
    it with Debian's /usr/bin/scons: that holds only while Debian's scons is that release."""
    r = subprocess.run(['/usr/bin/scons', '--version'], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip('/usr/bin/scons does not run here')
    found = re.search(r'SCons: v(\d+\.\d+\.\d+)', r.stdout)
    assert found, r.stdout
    assert found.group(1) == matrix.DEBIAN_RELEASE, (
        "Debian's scons is %s: set DEBIAN_RELEASE, or the matrix loses a full cell"
        % found.group(1))
