"""--process-spawner-status (issue 18): plain progress lines for logs, their count, the
history that gives durations, and no escape codes into a pipe.  The terminal's status
line is driven in tmux by test_status_terminal.py."""

import os
import shutil
import re
import stat

from scons_e2e import assert_same_outputs
from test_issue6_common import trace_events

PLAIN = '--process-spawner-status=plain'
# What scripts parse: "[DONE/TOTAL PCT%] M:SS elapsed, ~M:SS left" (or ~H:MM:SS left, or
# "no estimate yet"), then whatever follows for people.
PROGRESS = re.compile(r'^\[(\d[\d,]*)/(\d[\d,]*) (\d+)%\] (\d+:)?\d+:\d\d elapsed, '
                      r'(~(\d+:)?\d+:\d\d left|no estimate yet)( - .*)?$')
SUMMARY = re.compile(r'^\[(\d[\d,]*)/(\d[\d,]*) 100%\] (\d+:)?\d+:\d\d elapsed, done'
                     r'(, (\d+) failed)?$')
ESCAPE = '\x1b'


def trace_option(project):
    return '--process-spawner-trace=%s' % (project.root.parent / 'build.trace.json')


def commands_run(project):
    """The build's commands in the trace (Configure's checks are not the build's)."""
    events = trace_events(project.root.parent / 'build.trace.json')
    return [e for e in events if 'conftest' not in e['args']['command']]


def status_lines(run):
    lines = run.stdout.splitlines()
    progress = [l for l in lines if PROGRESS.match(l)]
    return progress, lines[-1] if lines else ''


def without_status(text):
    return '\n'.join(l for l in text.splitlines()
                     if not PROGRESS.match(l) and not SUMMARY.match(l))


def count_of(summary):
    m = SUMMARY.match(summary)
    assert m, summary
    return int(m.group(1).replace(',', '')), int(m.group(2).replace(',', '')), int(m.group(5) or 0)


def test_plain_lines_the_count_and_the_same_build(pool_module, projects):
    stock, pool = projects
    s = stock.scons('-j2')
    p = pool.scons('-j2', PLAIN, trace_option(pool), pool=True)
    assert s.returncode == p.returncode == 0, (s, p)
    assert_same_outputs(stock, pool)
    # The build's own lines are stock's (-j2: in any order); the status adds lines only.
    assert sorted(without_status(p.stdout).splitlines()) == sorted(s.stdout.splitlines()), (s, p)
    assert p.stderr == s.stderr
    assert ESCAPE not in p.stdout + p.stderr
    progress, last = status_lines(p)
    done, total, failed = count_of(last)
    assert done == total == len(commands_run(pool)) > 0 and failed == 0, p
    for line in progress:
        m = PROGRESS.match(line)
        assert int(m.group(1)) <= int(m.group(2).replace(',', '')), line
    assert (pool.root / '.spawnpool' / 'memory-history.sqlite').is_file()


def test_count_of_a_clean_rebuild_an_incremental_build_and_an_up_to_date_one(pool_module, project):
    r = project.scons('-j2', PLAIN, pool=True)
    assert r.returncode == 0, r
    full = count_of(status_lines(r)[1])[0]
    assert project.scons('-c', pool=True).returncode == 0
    # The history knows the last build of these targets: the total is right from the start.
    r = project.scons('-j2', PLAIN, trace_option(project), pool=True)
    progress, last = status_lines(r)
    assert count_of(last) == (full, full, 0), r
    assert len(commands_run(project)) == full
    # One source changes: the objects and programs that depend on it run again.
    with open(project.root / 'lib' / 'checksum.c', 'a') as f:
        f.write('int spawnpool_status_test_changed(void) { return 1; }\n')
    r = project.scons('-j2', PLAIN, trace_option(project), pool=True)
    done, total, _ = count_of(status_lines(r)[1])
    assert done == total == len(commands_run(project)) and 0 < done < full, r
    r = project.scons('-j2', PLAIN, pool=True)
    assert count_of(status_lines(r)[1]) == (0, 0, 0), r


def test_a_failing_command_with_keep_going(pool_module, projects):
    stock, pool = projects
    s = stock.scons('-k', '-j2', 'main', 'broken')
    p = pool.scons('-k', '-j2', 'main', 'broken', PLAIN, trace_option(pool), pool=True)
    assert s.returncode == p.returncode != 0, (s, p)
    assert sorted(without_status(p.stdout).splitlines()) == sorted(s.stdout.splitlines()), (s, p)
    done, total, failed = count_of(status_lines(p)[1])
    assert done == total == len(commands_run(pool)) and failed == 1, p


def test_a_pipe_gets_no_escape_codes(pool_module, project):
    # auto: a pipe is not a terminal, so no status at all (as stock).
    r = project.scons('-j2', pool=True)
    assert not any(PROGRESS.match(l) or SUMMARY.match(l) for l in r.stdout.splitlines()), r
    assert not (project.root / '.spawnpool').exists()
    assert project.scons('-c', pool=True).returncode == 0
    # line asked for on a pipe: plain lines, never an escape code.
    r = project.scons('-j2', '--process-spawner-status=line', pool=True)
    assert r.returncode == 0 and ESCAPE not in r.stdout + r.stderr, r
    assert SUMMARY.match(r.stdout.splitlines()[-1]), r


def test_history_off_and_a_read_only_tree(pool_module, project):
    r = project.scons('-j2', PLAIN, '--process-spawner-history=off', pool=True)
    assert r.returncode == 0 and SUMMARY.match(r.stdout.splitlines()[-1]), r
    assert not (project.root / '.spawnpool').exists()
    assert project.scons('-c', pool=True).returncode == 0
    # A tree where the history cannot be made: one warning, the build as without it.
    (project.root / '.spawnpool').mkdir()
    os.chmod(project.root / '.spawnpool', stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(project.root / '.spawnpool', os.W_OK):    # root: make it a file
            os.chmod(project.root / '.spawnpool', 0o700)
            os.rmdir(project.root / '.spawnpool')
            (project.root / '.spawnpool').write_text('not a directory\n')
        r = project.scons('-j2', PLAIN, pool=True)
    finally:
        if (project.root / '.spawnpool').is_dir():
            os.chmod(project.root / '.spawnpool', 0o700)
    assert r.returncode == 0 and SUMMARY.match(r.stdout.splitlines()[-1]), r
    warnings = [l for l in r.stderr.splitlines() if 'warning' in l]
    assert len(warnings) == 1 and '--process-spawner-history' in warnings[0], r


LIBS_TREE = {
    'SConstruct': "SConscript('sub/SConscript')\n",
    # Each compile takes 0.4 s at least, so that the build outlasts the plain printer's
    # first check (once a second): a quicker build ends with the summary alone.
    'sub/SConscript': ("env = Environment()\n"
                       "env['CCCOM'] = 'sleep 0.4 && ' + env['CCCOM']\n"
                       "env.Library('one', ['a0.c', 'a1.c', 'a2.c', 'a3.c'])\n"
                       "env.Library('two', ['b0.c', 'b1.c', 'b2.c', 'b3.c'])\n"
                       "env.Program('prog', ['main.c'], LIBS=['one', 'two'], LIBPATH=['.'])\n"),
    'sub/main.c': "int a0(void); int b0(void);\nint main(void) { return a0() + b0() - 2; }\n",
}
for _i in range(4):
    for _lib in 'ab':
        LIBS_TREE['sub/%s%d.c' % (_lib, _i)] = 'int %s%d(void) { return 1; }\n' % (_lib, _i)


def test_first_build_counts_the_libraries_a_program_links_and_the_directories(pool_module, project):
    # No history: the total is what the walk of the targets finds. The program reaches its
    # libraries only through LIBS, and the default target '.' its subdirectory only
    # through the directory's entries: both are found by scanning in SCons, and were not
    # counted (the total began at 2 and 0 units here).
    (project.root / 'SConstruct').unlink()
    for name, text in LIBS_TREE.items():
        (project.root / name).parent.mkdir(exist_ok=True)
        (project.root / name).write_text(text)
    units = 9 + 2 + 1           # objects, libraries (ar + ranlib each), the program
    for targets in ((), ('sub/prog',)):
        r = project.scons('-j2', PLAIN, trace_option(project), *targets, pool=True)
        assert r.returncode == 0, r
        progress, last = status_lines(r)
        ran = len(commands_run(project))
        assert count_of(last) == (ran, ran, 0) and ran == 9 + 4 + 1, r
        assert progress, r
        # Before a unit is made ready it is counted; after, its commands are: at most the
        # -j2 units between the two are missing from a line's total.
        for line in progress:
            assert int(PROGRESS.match(line).group(2).replace(',', '')) >= units - 2, (line, r)
        assert project.scons('-c', pool=True).returncode == 0
        shutil.rmtree(project.root / '.spawnpool')
        os.unlink(project.root / '.sconsign.dblite')
    # An incremental build: a node found up to date leaves the count when its task is
    # made ready (its executor is gone by then: the count keys units by their first
    # target), so the total follows what runs instead of staying at the whole tree's.
    assert project.scons('-j2', PLAIN, pool=True).returncode == 0
    with open(project.root / 'sub' / 'a0.c', 'a') as f:
        f.write('int a0_changed(void) { return 2; }\n')
    r = project.scons('-j2', PLAIN, trace_option(project), pool=True)
    progress, last = status_lines(r)
    ran = len(commands_run(project))
    assert count_of(last) == (ran, ran, 0) and ran == 1 + 2 + 1, r     # a0.o, libone, prog
    for line in progress:
        assert int(PROGRESS.match(line).group(2).replace(',', '')) <= ran + 2, (line, r)
