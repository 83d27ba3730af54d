"""Compiler launchers (distcc, ccache, icecc, ...) applied to ``sh -c`` compile lines.

Like CMake's ``<LANG>_COMPILER_LAUNCHER``: a compile command ``gcc -c a.c`` runs as
``distcc gcc -c a.c``; every other command (links, ``ar``, scripts) runs as it is.  The
driver's command lines, hence its build signatures, never change: the launcher is added
at spawn time.

A line is a compile when its program (the first word after any ``VAR=value`` words) is a
C/C++ compiler and the words up to the first shell operator include ``-c``.  A compiler
is a name from `DEFAULT_COMPILERS` or the configured extras, compared on the basename,
also with a version suffix (``gcc-12``, ``clang++-14``) or a target prefix
(``x86_64-linux-gnu-gcc``, ``arm-none-eabi-g++``).  A compiler found in a directory
named ``distcc``, ``ccache`` or ``icecc`` is a masquerade link (``/usr/lib/distcc/gcc``)
and is left alone, as is a line that already starts with a launcher.  A false positive
costs little: distcc and ccache run what they cannot handle as it is.

Stateless apart from caches filled under the GIL: safe from any thread.
"""

import os
import re
import shlex
import shutil

from .shell import command_words

__all__ = ['DEFAULT_COMPILERS', 'CompileClassifier', 'Launcher', 'LAUNCHER_ENV_PREFIXES',
           'DISTCC_EXIT_CODES']

DEFAULT_COMPILERS = ('cc', 'gcc', 'g++', 'c++', 'clang', 'clang++')

#: Driver variables a launcher needs even when the command's own environment lacks
#: them: HOME (distcc finds ~/.distcc/hosts there and silently compiles locally without
#: it) and each launcher's settings.
LAUNCHER_ENV_NAMES = ('HOME',)
LAUNCHER_ENV_PREFIXES = ('DISTCC_', 'CCACHE_', 'ICECC_', 'SCCACHE_')

_MASQUERADE_DIRS = frozenset(('distcc', 'ccache', 'icecc'))
_VERSION_SUFFIX = re.compile(r'-[0-9][0-9.]*$')
_ASSIGNMENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*=')

#: distcc's own exit codes (distcc(1) "EXIT CODES"); anything else is the compiler's.
DISTCC_EXIT_CODES = {
    100: 'failed', 101: 'got bad arguments', 102: 'could not bind',
    103: 'could not connect', 104: 'saw the compiler crash', 105: 'ran out of memory',
    106: 'got a bad host specification (DISTCC_HOSTS)', 107: 'had an I/O error',
    108: 'got a truncated reply', 109: 'had a protocol error',
    110: 'did not find the compiler on the remote host', 111: 'was called recursively',
    112: 'could not discard privileges', 113: 'was denied network access',
    114: 'found its host busy', 115: 'found no such file', 116: 'failed to distribute',
    118: 'timed out', 119: 'had a GSS-API error', 120: 'was called for preprocessing',
}

# distcc's warnings when it compiles on this machine after all (fallback is on).
_DISTCC_LOCAL = (b'running locally instead', b'retrying locally')


class CompileClassifier:
    """Decides whether an ``sh -c`` command line is a C/C++ compile."""

    def __init__(self, extra_compilers=()):
        names = set(DEFAULT_COMPILERS)
        names.update(n.strip() for n in extra_compilers if n and n.strip())
        self.names = frozenset(names)
        self._program_cache = {}

    def is_compiler(self, program):
        """Whether the program word (a name or path) names a C/C++ compiler."""
        known = self._program_cache.get(program)
        if known is None:
            known = self._program_cache[program] = self._is_compiler(program)
        return known

    def _is_compiler(self, program):
        directory, name = os.path.split(program)
        if directory and os.path.basename(directory) in _MASQUERADE_DIRS:
            return False
        for candidate in (name, _VERSION_SUFFIX.sub('', name)):
            if candidate in self.names:
                return True
            # A target prefix: x86_64-linux-gnu-gcc, arm-none-eabi-g++-12.
            dash = candidate.find('-')
            while dash > 0:
                if candidate[dash + 1:] in self.names:
                    return True
                dash = candidate.find('-', dash + 1)
        return False

    def is_compile(self, line):
        """Whether `line` (the text sh -c runs) is a compile: see the module comment."""
        return self.compile_offset(line) is not None

    def compile_offset(self, line):
        """Where to put a launcher in `line` if it is a compile, else None."""
        words = command_words(line)
        first = 0
        while first < len(words) and _ASSIGNMENT.match(line, words[first][0]):
            first += 1
        if first == len(words):
            return None
        pos, program = words[first]
        if program is None or not self.is_compiler(program):
            return None
        # The compiler's own words end where its simple command does (at && ; | ...).
        if any(word == '-c' for _, word in words[first + 1:]):
            return pos
        return None


class Launcher:
    """A launcher command (``distcc``, ``ccache``, ``icecc``, ``ccache distcc`` ...).

    `command` is shell text; its program is looked up once on `path` (the driver's
    PATH), as CMake does, so the commands' own PATH need not have it.
    """

    def __init__(self, command, classifier=None, path=None, environ=None):
        words = shlex.split(command)
        if not words:
            raise ValueError('empty launcher')
        self.name = os.path.basename(words[0])
        resolved = shutil.which(words[0], path=path) if '/' not in words[0] else words[0]
        self.found = resolved is not None
        self.prefix = ' '.join(shlex.quote(w) for w in [resolved or words[0]] + words[1:])
        self.classifier = classifier or CompileClassifier()
        self.is_distcc = self.name == 'distcc' or 'distcc' in [
            os.path.basename(w) for w in words[1:]]
        environ = os.environ if environ is None else environ
        self._driver_env = tuple(
            (k, v) for k, v in environ.items()
            if k in LAUNCHER_ENV_NAMES or k.startswith(LAUNCHER_ENV_PREFIXES))

    def wrap(self, line):
        """The line with the launcher added if it is a compile, else None."""
        pos = self.classifier.compile_offset(line)
        if pos is None:
            return None
        return '%s%s %s' % (line[:pos], self.prefix, line[pos:])

    def environment(self, env):
        """`env` plus the driver's launcher variables it lacks (a copy only if needed)."""
        missing = [kv for kv in self._driver_env if kv[0] not in env]
        if not missing:
            return env
        env = dict(env)
        env.update(missing)
        return env

    def ran_locally(self, output):
        """Whether the launcher's messages in `output` say it compiled on this machine."""
        if not output or not self.is_distcc:
            return False
        return any(marker in output for marker in _DISTCC_LOCAL)

    def failure(self, status):
        """A message naming the launcher if `status` is the launcher's own failure."""
        if status in (126, 127) and not self.found:
            return '%s was not found on PATH (exit %d)' % (self.name, status)
        if status == 126:
            return '%s could not be executed (exit 126)' % self.name
        if self.is_distcc and status in DISTCC_EXIT_CODES:
            return '%s %s (exit %d)' % (self.name, DISTCC_EXIT_CODES[status], status)
        return None
