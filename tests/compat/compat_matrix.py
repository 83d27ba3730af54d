"""The SCons x CPython compatibility matrix: which cells run which tests, and the means to
run SCons releases from their tarballs under any interpreter.

- **full** cells run the end-to-end suites (tests/scons, and the SCons builds of
  tests/distributed: distcc as launcher, make's jobserver) against an SCons release under
  Debian's /usr/bin/python3. Debian's own scons is the full cell the regular suites run.
- **core** cells run build identity (with Configure and chdir=), failing/missing/killed
  commands and interrupts under each pyenv CPython, with the first release here that
  supports it; and the newest release under the oldest and the newest CPython (3.8 is
  where users of a current pip-installed SCons gain most: its stock spawning forks).
- Two more core cells, under /usr/bin/python3, run the scheduler a release does not use
  by default: NewParallel on 4.6 (`--experimental=tm_v2`, default since 4.7) and the
  legacy one on the newest release (`--experimental=legacy_sched`).

The tarballs come from $SPAWNPOOL_SCONS_RELEASES (default ../shared/scons beside the
repository); the interpreters from pyenv ($PYENV_ROOT, default ~/.pyenv). A cell whose release or
interpreter is absent is skipped with the reason. scons_plugin/README.md's "Supported
versions" table must say exactly this (tests/compat/test_supported_versions.py).

Not a conftest.py: the test modules import it by name.
"""

import glob
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / 'tests' / 'scons'))
import scons_e2e  # noqa: E402  (builds, sessions, leak checks of the SCons suite)

# The project's shared folder sits beside the repository (../shared), wherever it is cloned.
RELEASES_DIR = Path(os.environ.get('SPAWNPOOL_SCONS_RELEASES') or REPO.parent / 'shared' / 'scons')
PYENV_ROOT = Path(os.environ.get('PYENV_ROOT') or os.path.expanduser('~/.pyenv'))
SYSTEM_PYTHON = scons_e2e.SYSTEM_PYTHON
SYSTEM_PYTHON_VERSION = '3.11'          # Debian bookworm's; checked by the tests
DEBIAN = 'debian'                       # the release name of Debian's /usr/bin/scons
DEBIAN_RELEASE = '4.4.0'                 # what Debian bookworm's /usr/bin/scons is

RELEASES = ('4.0.1', '4.2.0', '4.4.0', '4.5.2', '4.6.0', '4.7.0', '4.8.1', '4.9.1', '4.10.1')
PYTHONS = ('3.8', '3.9', '3.10', '3.11', '3.12', '3.13')
NEWEST = RELEASES[-1]
# The releases whose full cell runs: each change the plugin meets (scons_plugin/README.md,
# "What changed between SCons versions") from both sides. 4.0.1 the oldest; 4.4.0 (the
# last with SCons/Job.py) is Debian's /usr/bin/scons, which the regular suites run under
# the same interpreter, so its tarball has no full cell; 4.5.2 the first with
# SCons/Taskmaster/Job.py; 4.7.0 the first with NewParallel as the default; 4.8.1 the
# first whose SetOption takes an added option; 4.10.1 the newest. The others (4.2.0,
# 4.6.0, 4.9.1) change nothing the plugin uses and run the core suite: three full cells
# were 7 of scripts/test's 54 minutes in CI.
FULL_RELEASES = ('4.0.1', '4.5.2', '4.7.0', '4.8.1', NEWEST)
# The first release here made for each CPython: released after it (3.8.0 2019-10,
# 3.9.0 2020-10, 3.10.0 2021-10, 3.11.0 2022-10, 3.12.0 2023-10), or for 3.13 the one
# tested against its beta (4.8.1, 2024-09). 4.0.1 and 4.2.0 still run on 3.12/3.13, with
# SyntaxWarnings from SCons' own code.
FIRST_SUPPORTING = {'3.8': '4.0.1', '3.9': '4.2.0', '3.10': '4.4.0', '3.11': '4.5.2',
                    '3.12': '4.6.0', '3.13': '4.8.1'}

# What each kind of cell runs, as pytest arguments relative to the repository.
FULL_SUITE = ['tests/scons', 'tests/distributed/test_distcc_build.py',
              'tests/distributed/test_make_jobserver.py',
              # in-process with Debian's SCons / no SCons at all: nothing version-specific
              '--ignore=tests/scons/test_plugin_unit.py',
              '--ignore=tests/scons/test_issue6_launcher.py']
CORE_SUITE = ['tests/scons/test_stock_equivalence.py', 'tests/scons/test_failures.py',
              'tests/scons/test_interrupts.py',
              # the status line's count reads the Taskmaster's nodes, executors and
              # scanners, which differ between releases (10 s of a cell)
              'tests/scons/test_status.py::'
              'test_count_of_a_clean_rebuild_an_incremental_build_and_an_up_to_date_one',
              'tests/scons/test_status.py::'
              'test_first_build_counts_the_libraries_a_program_links_and_the_directories']
# Tests whose expectation holds for the legacy scheduler only, left out of NewParallel
# cells with the reason (printed with the matrix). None today: the tests read
# NewParallel's 'Error -2' for an interrupted command as 'Build interrupted.'.
NEWPARALLEL_DESELECTED = {}


class Cell:
    """One SCons release under one CPython, and which tests run there; `flags` are SCons
    arguments every run of the cell gets (put in by its `scons` command)."""

    def __init__(self, release, python, kind, flags=()):
        self.release, self.python, self.kind, self.flags = release, python, kind, tuple(flags)

    @property
    def row(self):
        """The cell's row in the README's table: the release, and its flags if any."""
        return ' '.join((self.release,) + self.flags)

    @property
    def system(self):
        """Whether the cell runs on /usr/bin/python3 (else on pyenv's CPython)."""
        return self.kind == 'full' or bool(self.flags)

    @property
    def id(self):
        where = 'system' if self.system else 'pyenv'
        tag = ''.join('-' + f.split('=')[-1] for f in self.flags)
        return '%s%s-py%s-%s' % (self.release, tag, self.python, where)

    @property
    def scheduler(self):
        """'newparallel' (SCons' default since 4.7, or --experimental=tm_v2) or 'legacy'."""
        if '--experimental=tm_v2' in self.flags:
            return 'newparallel'
        if '--experimental=legacy_sched' in self.flags:
            return 'legacy'
        newer = tuple(map(int, self.release.split('.'))) >= (4, 7)
        return 'newparallel' if newer else 'legacy'

    @property
    def deselected(self):
        return NEWPARALLEL_DESELECTED if self.scheduler == 'newparallel' else {}

    @property
    def suite(self):
        suite = FULL_SUITE if self.kind == 'full' else CORE_SUITE
        return suite + ['--deselect=' + test for test in sorted(self.deselected)
                        if test.split('::')[0] in suite]

    def __repr__(self):
        return '<Cell %s %s>' % (self.id, self.kind)


def cells():
    """Every cell of the matrix that tests/compat runs: the full suite on FULL_RELEASES,
    the core suite on every other release (under 3.11 where no other CPython has it)."""
    out = [Cell(release, SYSTEM_PYTHON_VERSION, 'full') for release in FULL_RELEASES]
    out += [Cell(release, SYSTEM_PYTHON_VERSION, 'core', ['--experimental=' + scheduler])
            for release, scheduler in (('4.6.0', 'tm_v2'), (NEWEST, 'legacy_sched'))]
    for python in PYTHONS:
        releases = {FIRST_SUPPORTING[python]}
        if python in (PYTHONS[0], PYTHONS[-1]):
            releases.add(NEWEST)
        out += [Cell(release, python, 'core') for release in sorted(releases, key=RELEASES.index)]
    covered = {cell.release for cell in out} | {DEBIAN_RELEASE}
    out += [Cell(release, SYSTEM_PYTHON_VERSION, 'core') for release in RELEASES
            if release not in covered]
    return out


def table():
    """{(release, python): {'full', 'core'}}: what the README's table must say."""
    grid = {(DEBIAN, SYSTEM_PYTHON_VERSION): {'full'}}
    for cell in cells():
        grid.setdefault((cell.row, cell.python), set()).add(cell.kind)
    return grid


# --- finding things ------------------------------------------------------------------

def tarball(release):
    return RELEASES_DIR / ('scons-%s.tar.gz' % release)


def release_problem(release):
    """Why `release` cannot be tested here, or None."""
    if not RELEASES_DIR.is_dir():
        return ('no SCons release tarballs: %s is absent (set SPAWNPOOL_SCONS_RELEASES)'
                % RELEASES_DIR)
    if not tarball(release).is_file():
        return 'SCons %s: %s is absent' % (release, tarball(release))
    return None


def pyenv_python(version):
    """pyenv's interpreter for CPython `version` ('3.8'), newest patch release, or None."""
    found = glob.glob(str(PYENV_ROOT / 'versions' / ('%s.*' % version) / 'bin' / 'python3'))
    found = [p for p in found if re.search(r'/%s\.\d+/bin/' % re.escape(version), p)]
    found.sort(key=lambda p: int(re.search(r'/%s\.(\d+)/' % re.escape(version), p).group(1)))
    return found[-1] if found else None


def interpreter(cell):
    return SYSTEM_PYTHON if cell.system else pyenv_python(cell.python)


def python_problem(cell):
    """Why the cell's interpreter cannot run it, or None."""
    python = interpreter(cell)
    if not python or not os.access(python, os.X_OK):
        return ('CPython %s not found (pyenv: %s/versions/%s.*/bin/python3)'
                % (cell.python, PYENV_ROOT, cell.python))
    return module_problem(python)


def module_problem(python):
    """Why build/python/spawnpool has no module for `python`, or None."""
    suffix = ext_suffix(python)
    if not suffix:
        return '%s does not run' % python
    module = scons_e2e.MODULE_DIR / 'spawnpool' / ('_spawnpool' + suffix)
    if not module.is_file():
        return ('no module for %s in %s: the build skipped it (see the "spawnpool:" lines '
                'of the CMake configure output)' % (python, module.parent))
    return None


_suffixes = {}


def ext_suffix(python):
    if python not in _suffixes:
        r = subprocess.run([python, '-c', 'import sysconfig; '
                            'print(sysconfig.get_config_var("EXT_SUFFIX"))'],
                           capture_output=True, text=True, timeout=60)
        _suffixes[python] = r.stdout.strip() if r.returncode == 0 else None
    return _suffixes[python]


# --- running a release -----------------------------------------------------------------

def unpack(release, dest):
    """Unpack the release's tarball into dest (once); return scons-X.Y.Z/."""
    root = Path(dest) / ('scons-%s' % release)
    if not (root / 'scripts' / 'scons.py').is_file():
        with tarfile.open(tarball(release)) as tar:
            tar.extractall(dest)
    return root


WRAPPER = '''#!%(shebang)s
# SCons %(release)s from its release tarball, for spawnpool's compatibility matrix.
# Named `scons`, as an installed SCons is (the tests read process names).
import runpy
import sys
sys.argv[0:1] = [%(script)r] + %(flags)r
runpy.run_path(%(script)r, run_name='__main__')
'''


def scons_command(release_root, python, bin_dir, flags=(), shebang=None):
    """An executable `scons` in bin_dir that runs release_root's SCons under `python`
    (named by `shebang`, default `python` itself), with `flags` before the caller's
    arguments. scripts/scons.py puts its own SCons/ first on sys.path (not Debian's)."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / 'scons'
    path.write_text(WRAPPER % dict(shebang=shebang or python, release=release_root.name[len('scons-'):],
                                   script=str(release_root / 'scripts' / 'scons.py'),
                                   flags=list(flags)))
    path.chmod(0o755)
    # The tests run SCons with PYTHONDONTWRITEBYTECODE (no __pycache__ in test trees): without
    # its .pyc files every run would compile SCons' ~200 modules again (a second or more).
    subprocess.run([python, '-m', 'compileall', '-q', str(release_root / 'SCons')],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return path
