"""Direct exec is equivalent to ``/bin/sh -c LINE``: same argv, environment, status, output.

The parser is checked against the real shell on a corpus (hand-written lines, SCons-escaped
arguments, random lines); the runner is checked end to end through the pool, including
the 126/127 cases it hands back to sh and the signal statuses it maps.
"""

import random
import signal
import subprocess

import pytest

# helper_bin and pool are fixtures: pytest finds them in this module's namespace.
from cli_support import helper_bin, needs_module, pool, spawnpool  # noqa: F401,F811

pytestmark = needs_module

P = 'print_argv'

# Lines the parser must accept; each must give the shell's argv.
ACCEPTED = [
    P,
    P + ' a b c',
    P + '   a\tb  ',
    P + ' "a b" \'c d\' e\\ f',
    P + ' "" \'\' a""b',
    P + r' "a\\b" "\$x" "\`" "\"" "\q" "\\"',
    P + r""" 'a\b' 'a"b' '$x' '`x`' '*' '~' '#' '!' '{a,b}' ';' '|&<>()' ' ' """,
    P + r' \$ \\ \a \' \" \* \~ \# \  \; \! \{ \}',
    P + ' -DFOO=1 -I. -o out/a.o --flag=x,y:z +a @file %d ^x',
    P + ' a=b x==y',
    P + ' x"y"z \'p\'q "1"\'2\'3',
    '"%s" a' % P,
    "'%s' 'a'" % P,
    P + ' "a\ttab" \'b\tc\'',
    P + ' "quoted\\ back\\slash" "\\n" \'\\n\'',
    P + ' "\u00e9t\u00e9" \'\u00fc\'',
    'cc -O2 -Wall -Ilib -Igen -c -o lib/checksum.o lib/checksum.c',
]

# Lines that need a shell (or are too odd to take the risk): the parser must refuse.
REFUSED = [
    '', '   ', '\t',
    P + ' $HOME', P + ' ${x}', P + ' $(date)', P + ' `date`', P + ' "a $x"', P + ' "`x`"',
    P + ' "$"', P + ' a > f', P + ' a < f', P + ' a 2>&1', P + ' a | cat', P + ' a; ' + P,
    P + ' a && ' + P, P + ' a || ' + P, P + ' a &', P + ' *', P + ' a?', P + ' [ab]',
    P + ' ~', P + ' ~/x', P + ' a=~/x', P + ' {a,b}', P + ' #c', P + ' a#b', 'FOO=1 ' + P,
    'A=1', P + ' !x', P + ' (a)', P + ' a\\\nb', P + " 'a\nb'", P + ' "a\nb"',
    P + ' a\nb', P + ' "unterminated', P + " 'unterminated", P + ' trailing\\',
    P + ' \u00e9', 'echo hi', 'true', 'false', 'test -f x', '[ -f x ]', 'cd /', 'exit 3',
    '. ./x', ': x', 'exec ' + P, 'command ' + P, 'kill 0', 'printf x', 'pwd', 'read x',
    'if', 'while', 'time ' + P, '! ' + P, '"echo" hi', "'exit' 3", '""', "'' a",
]


def sh_argv(line, helper_bin, cwd=None):
    """(argv, env) print_argv saw when /bin/sh ran `line`."""
    r = subprocess.run(['/bin/sh', '-c', line], capture_output=True, cwd=cwd,
                       env=helper_env(helper_bin), timeout=30)
    assert r.returncode == 0, (line, r)
    return parse_print_argv(r.stdout)


def helper_env(helper_bin, **extra):
    env = {'PATH': '%s:/usr/bin:/bin' % helper_bin, 'LC_ALL': 'C'}
    env.update(extra)
    return env


def parse_print_argv(out):
    args, env = [], {}
    for line in out.decode().splitlines():
        tag, _, data = line.partition(' ')
        text = bytes.fromhex(data).decode('utf-8', 'surrogateescape')
        if tag == 'a':
            args.append(text)
        else:
            name, _, value = text.partition('=')
            env[name] = value
    return args, env


def split(line):
    from spawnpool.shell import split_simple_command
    return split_simple_command(line)


@pytest.mark.parametrize('line', ACCEPTED)
def test_parser_gives_the_shells_argv(line, helper_bin):
    words = split(line)
    assert words is not None, line
    assert words[0] in (P, 'cc'), words
    if words[0] == P:
        assert words[1:] == sh_argv(line, helper_bin)[0]


@pytest.mark.parametrize('line', REFUSED)
def test_parser_refuses_shell_syntax(line):
    assert split(line) is None


def scons_escape():
    try:
        import SCons.Platform.posix as posix
        import SCons.Subst as subst
    except ImportError:
        pytest.skip('SCons is not importable by this interpreter')
    return posix.escape, subst.quote_spaces


ODD_ARGUMENTS = [
    'plain', 'with space', 'tab\there', 'dq"inside', 'dollar$x', '${HOME}', 'back\\slash',
    'ends with\\', '\\\\double', "single'q", 'semi;colon', 'amp&', 'pipe|', 'lt<gt>',
    'star*', 'q?', 'br[a]', 'tilde~', '~lead', 'hash#', '#lead', 'bang!', 'paren()',
    'brace{a,b}', 'eq=sign', '', ' ', '-', '--opt="v a l"', '\u00e9t\u00e9', "'",
    '"', '$', '\\', '\\"', '\\$', '$$', 'a\\nb',
]


def test_scons_escaped_arguments(helper_bin):
    """SCons' posix escape() output is taken (unless it holds a backquote) and exact."""
    escape, quote_spaces = scons_escape()
    for arg in ODD_ARGUMENTS:
        line = '%s %s x' % (P, escape(arg))
        words = split(line)
        assert words is not None, (arg, line)
        assert words[1:] == [arg, 'x'] == sh_argv(line, helper_bin)[0], line
    # Backquotes are not escaped by SCons: inside "..." the shell would run them.
    assert split('%s %s' % (P, escape('a`b`'))) is None
    # quote_spaces (what non-literal arguments with blanks get): whatever is taken is exact.
    taken = 0
    for arg in ODD_ARGUMENTS:
        line = '%s %s x' % (P, quote_spaces(arg))
        words = split(line)
        if words is not None:
            taken += 1
            assert words[1:] == sh_argv(line, helper_bin)[0], line
    assert taken >= 10


def test_random_lines_match_the_shell(helper_bin):
    """Random lines over shell-special characters: every accepted one is the shell's."""
    rng = random.Random(6)
    alphabet = 'ab  =-./\\\\""\'\'$`*?~#;|&<>(){}![]\t%^@:,+'
    accepted = 0
    for _ in range(400):
        line = P + ' ' + ''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))
        words = split(line)
        if words is None:
            continue
        r = subprocess.run(['/bin/sh', '-c', line], capture_output=True,
                           env=helper_env(helper_bin), timeout=30)
        assert r.returncode == 0 and not r.stderr, (line, r)
        assert words[1:] == parse_print_argv(r.stdout)[0], line
        accepted += 1
    assert accepted >= 30, accepted


# --- end to end through the pool: the DirectExec layer against /bin/sh ----------------

def run_both(pool, line, env, cwd, tmp_path):
    """((status, stdout, stderr) from `sh -c`, the same from direct exec, argvs run)."""
    from spawnpool.direct_exec import DirectExec
    from spawnpool.testing import FakeRunner
    sh = subprocess.run(['sh', '-c', line], capture_output=True, cwd=cwd, env=env,
                        timeout=30)
    recording = FakeRunner(answer=pool.run)     # passes each command on to the pool
    result = DirectExec(recording).run(spawnpool.Command(['sh', '-c', line], env, str(cwd),
                                                         spawnpool.CAPTURE))
    return ((sh.returncode, sh.stdout, sh.stderr),
            (result.returncode, result.stdout, result.stderr), recording.argvs)


@pytest.fixture
def workdir(tmp_path, helper_bin):
    """A cwd with the files the status cases need."""
    d = tmp_path / 'work'
    d.mkdir()
    (d / 'not_executable').write_text('#!/bin/sh\necho never\n')
    (d / 'a_directory').mkdir()
    script = d / 'script_without_shebang'
    script.write_text('echo run by sh as a script: "$0" "$1"\nexit 4\n')
    script.chmod(0o755)
    (d / 'bin').mkdir()
    (d / 'bin' / 'on_path_not_executable').write_text('echo never\n')
    return d


STATUS_CASES = [
    # line, expected status, expected stderr (None: compare with sh only), direct?
    ('exit_as 0', 0, b'', True),
    ('exit_as 3', 3, b'', True),
    ('exit_as 255', 255, b'', True),
    ('exit_as -%d' % signal.SIGSEGV, 128 + signal.SIGSEGV, b'Segmentation fault\n', True),
    ('exit_as -%d' % signal.SIGABRT, 128 + signal.SIGABRT, b'Aborted\n', True),
    ('exit_as -%d' % signal.SIGKILL, 128 + signal.SIGKILL, b'Killed\n', True),
    ('exit_as -%d' % signal.SIGUSR1, 128 + signal.SIGUSR1, b'User defined signal 1\n', True),
    ('exit_as -%d' % signal.SIGPIPE, 128 + signal.SIGPIPE, b'', True),
    ('no_such_program_for_the_test', 127,
     b'sh: 1: no_such_program_for_the_test: not found\n', True),
    ('/no/such/dir/prog', 127, b'sh: 1: /no/such/dir/prog: not found\n', True),
    ('./not_executable', 126, b'sh: 1: ./not_executable: Permission denied\n', True),
    ('./a_directory', 126, b'sh: 1: ./a_directory: Permission denied\n', True),
    ('on_path_not_executable', None, None, True),
    ('./script_without_shebang arg', 4, b'', True),
    ('print_argv "a b" \'c\'', 0, b'', True),
    ('print_argv $HOME', 0, b'', False),
    ('exit_as 2 && echo no', 2, b'', False),
]


@pytest.mark.parametrize('line,status,stderr,direct', STATUS_CASES)
def test_runner_matches_sh(pool, helper_bin, workdir, tmp_path, line, status, stderr, direct):
    env = helper_env(helper_bin, HOME='/home/x')
    env['PATH'] += ':%s/bin' % workdir
    sh, ours, argvs = run_both(pool, line, env, workdir, tmp_path)
    if line.startswith('print_argv'):
        # Same argv and environment (PWD included); the environment's order may differ.
        assert parse_print_argv(ours[1]) == parse_print_argv(sh[1]), (sh, ours)
        assert ours[0] == sh[0] and ours[2] == sh[2], (sh, ours)
    else:
        assert ours == sh
    if status is not None:
        assert sh[0] == status and sh[2] == stderr, sh
    # Direct exec was tried first when the line allows it; sh ran it otherwise.
    assert (argvs[0][0] != 'sh') == direct, argvs


def test_pwd_as_dash_exports_it(pool, helper_bin, tmp_path):
    real = tmp_path / 'real'
    real.mkdir()
    (tmp_path / 'link').symlink_to(real)
    cases = [
        {},                                         # no PWD: the physical cwd
        {'PWD': str(tmp_path / 'link')},            # a logical path to the cwd: kept
        {'PWD': str(tmp_path)},                     # stale: replaced
        {'PWD': 'relative'},                        # not absolute: replaced
        {'PWD': str(real)},                         # exact
    ]
    for extra in cases:
        for cwd in (real, tmp_path / 'link'):    # a cwd given through a symlink, too
            env = helper_env(helper_bin, **extra)
            sh, ours, _ = run_both(pool, 'print_argv x', env, cwd, tmp_path)
            assert parse_print_argv(ours[1]) == parse_print_argv(sh[1]), (extra, cwd)


def test_without_path_sh_does_the_search(pool, helper_bin, tmp_path):
    """dash's default PATH is not execvp's: a line without PATH goes through sh."""
    sh, ours, argvs = run_both(pool, 'ls /', {'LC_ALL': 'C'}, tmp_path, tmp_path)
    assert ours == sh
    assert argvs[0][0] == 'sh'
    sh, ours, argvs = run_both(pool, '/bin/ls /', {'LC_ALL': 'C'}, tmp_path, tmp_path)
    assert ours == sh
    assert argvs[0][0] == '/bin/ls'


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_group_signals_stay_negative(pool, helper_bin, tmp_path, signum):
    """Documented difference: INT/TERM/HUP/QUIT normally reach the whole group, shell
    included, and then sh dies of them too (-N); direct exec reports -N even when the
    program alone got the signal, where sh would say 128+N."""
    _, ours, _ = run_both(pool, 'exit_as -%d' % signum, helper_env(helper_bin), tmp_path,
                          tmp_path)
    assert ours == (-signum, b'', b'')


def test_sh_lines_only():
    from spawnpool.direct_exec import direct_argv
    assert direct_argv(['sh', '-c', 'cc -c a.c']) == ['cc', '-c', 'a.c']
    assert direct_argv(['/bin/sh', '-c', 'cc -c a.c']) == ['cc', '-c', 'a.c']
    assert direct_argv(['bash', '-c', 'cc -c a.c']) is None
    assert direct_argv(['sh', '-e', '-c', 'cc']) is None
    assert direct_argv(['cc', '-c', 'a.c']) is None
