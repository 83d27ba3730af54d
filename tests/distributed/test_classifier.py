"""Which sh -c lines are compiles, and what a launcher makes of them (no processes)."""

import pytest

from dist_support import module_problem

_skip, _failure = module_problem()
if _skip:
    pytest.skip(_skip, allow_module_level=True)

from spawnpool.launcher import CompileClassifier, Launcher  # noqa: E402

COMPILES = [
    'gcc -o f.o -c -Wall -Iinclude f.c',
    'gcc -o "f.o" -c -Wall "f.c"',                 # SCons quotes some words
    'cc -c a.c',
    'g++ -c -o a.o a.cc',
    'c++ -c a.cc',
    'clang -c a.c',
    'clang++ -c a.cc',
    '/usr/bin/gcc -c a.c',
    'gcc-12 -c a.c',                               # versioned
    'clang++-14 -c a.cc',
    'x86_64-linux-gnu-gcc -c a.c',                 # target prefix
    'x86_64-linux-gnu-g++-12 -c a.cc',
    'arm-none-eabi-gcc -mthumb -c a.c',
    '  gcc -c a.c',                                # leading blanks
    'CCACHE_DISABLE=1 gcc -c a.c',                 # assignments before the program
    '"/opt/my tools/gcc" -c a.c',                  # quoted program
    "gcc -DX='a b' -c a.c",
    'gcc -c a.c -o a.o && touch stamp',            # -c before the operator counts
]

NOT_COMPILES = [
    'gcc -o prog prog.o -L. -lx',                  # a link: no -c
    'gcc -o prog prog.c',                          # compile and link in one: no -c
    'ar rc libx.a a.o b.o',
    'ranlib libx.a',
    'ld -o x a.o',
    'gcc-ar rc libx.a a.o',                        # binutils wrapper, not a compiler
    'x86_64-linux-gnu-gcc-nm a.o',
    'cpp -c a.c',                                  # the preprocessor
    'python3 gen.py -c config',
    'sh -c "gcc -c a.c"',
    'cd sub && gcc -c a.c',
    'gcc -o prog a.o && tool -c',                  # -c after an operator is not gcc's
    'ccache gcc -c a.c',                           # a launcher already
    'distcc gcc -c a.c',
    '/usr/lib/distcc/gcc -c a.c',                  # a masquerade link
    '/usr/lib/ccache/g++ -c a.cc',
    '$CC -c a.c',                                  # an expansion: unknown program
    '`which gcc` -c a.c',
    '(gcc -c a.c)',
    '',
    '   ',
    'gcc',
]


@pytest.mark.parametrize('line', COMPILES)
def test_compiles(line):
    assert CompileClassifier().is_compile(line)


@pytest.mark.parametrize('line', NOT_COMPILES)
def test_not_compiles(line):
    assert not CompileClassifier().is_compile(line)


def test_configured_compilers():
    classifier = CompileClassifier(['icc', 'foo-gcc', ' nvcc ', ''])
    assert classifier.is_compile('icc -c a.c')
    assert classifier.is_compile('/opt/intel/bin/icc -c a.c')
    assert classifier.is_compile('nvcc -c a.cu')
    assert classifier.is_compile('foo-gcc -c a.c')
    assert not CompileClassifier().is_compile('icc -c a.c')
    assert not classifier.is_compile('icc -o prog a.o')


def test_wrap_inserts_after_assignments():
    launcher = Launcher('distcc', path='/usr/bin:/bin')
    assert launcher.wrap('gcc -c a.c') == '%s gcc -c a.c' % launcher.prefix
    assert launcher.wrap('X=1 gcc -c a.c') == 'X=1 %s gcc -c a.c' % launcher.prefix
    assert launcher.wrap('gcc -o p a.o') is None


def test_launcher_resolved_on_driver_path(tmp_path):
    tool = tmp_path / 'mylauncher'
    tool.write_text('#!/bin/sh\nexec "$@"\n')
    tool.chmod(0o755)
    launcher = Launcher('mylauncher --flag', path=str(tmp_path))
    assert launcher.found and launcher.name == 'mylauncher'
    assert launcher.prefix == '%s --flag' % tool
    missing = Launcher('no-such-launcher-x', path=str(tmp_path))
    assert not missing.found and missing.prefix == 'no-such-launcher-x'
    assert 'not found' in missing.failure(127)
    with pytest.raises(ValueError):
        Launcher('   ')


def test_launcher_environment_adds_driver_variables():
    driver = {'HOME': '/home/u', 'DISTCC_HOSTS': 'a b', 'CCACHE_DIR': '/c',
              'ICECC_VERSION': 'v', 'PATH': '/driver', 'OTHER': 'x'}
    launcher = Launcher('distcc', path='/usr/bin:/bin', environ=driver)
    env = {'PATH': '/usr/bin:/bin', 'DISTCC_HOSTS': 'mine'}
    got = launcher.environment(env)
    assert got == {'PATH': '/usr/bin:/bin', 'DISTCC_HOSTS': 'mine', 'HOME': '/home/u',
                   'CCACHE_DIR': '/c', 'ICECC_VERSION': 'v'}
    assert env == {'PATH': '/usr/bin:/bin', 'DISTCC_HOSTS': 'mine'}   # not modified
    complete = dict(got)
    assert launcher.environment(complete) is complete                  # no copy needed


def test_distcc_failures_and_fallbacks():
    distcc = Launcher('distcc', path='/usr/bin:/bin')
    assert distcc.is_distcc
    assert distcc.failure(116) == 'distcc failed to distribute (exit 116)'
    assert 'compiler' in distcc.failure(110)
    assert distcc.failure(0) is None and distcc.failure(1) is None   # the compiler's
    assert distcc.ran_locally(
        b'distcc[12] (dcc_build_somewhere) Warning: failed to distribute, '
        b'running locally instead\n')
    assert distcc.ran_locally(b"distcc[3] (dcc_build_somewhere) Warning: remote "
                              b"compilation of 'a.c' failed, retrying locally\n")
    assert not distcc.ran_locally(b'a.c:1: warning: unused variable\n')
    assert not distcc.ran_locally(None)
    other = Launcher('sh', path='/usr/bin:/bin')
    assert not other.is_distcc and other.failure(116) is None
    assert not other.ran_locally(b'running locally instead')
