"""Reading shell command lines: the one shell-word parser of the package.

`split_simple_command(line)` returns the argv that ``sh -c LINE`` would execute, or None
when the line uses anything only a shell can do (expansions, redirections, pipes, lists,
globbing, assignments, builtins, keywords...).  It accepts a deliberately small subset of
the POSIX shell grammar in which quote removal can be undone exactly, so that whenever it
answers, the answer is the shell's; everything else is "ask the shell".

Accepted: words of ``A-Z a-z 0-9 _ - . / , : + = @ % ^`` separated by spaces or tabs;
'single quotes' (anything but a newline); "double quotes" without ``$`` or backquotes,
where backslash escapes ``$ ` " \\`` and stays literal before anything else (as POSIX
says); a backslash outside quotes escaping any character but a newline.  That covers what
SCons generates: its posix ``escape()`` wraps arguments in double quotes escaping ``\\ " $``
and ``quote_spaces`` wraps arguments holding blanks in double quotes.

`command_words(line)` gives the words of the line's first simple command with their
offsets, each unquoted when it is in that subset (None otherwise): the compiler launcher
(launcher.py) finds a compile's program and its ``-c`` with it.

Pure functions, no state: safe from any thread.  Regular expressions are compiled once at
import; a plain line (the common case: ``gcc -o a.o -c a.c``) costs one regex match and
one ``str.split``.
"""

import re

__all__ = ['split_simple_command', 'command_words', 'SHELL_WORDS']

# Characters that mean nothing to sh outside quotes.  Left out on purpose: glob (* ? [ ]),
# brace expansion ({ }: bash as sh), tilde (~), comment (#), history/negation (!), and
# anything non-ASCII (multibyte locales where a trail byte looks like a backslash).
_SAFE = r'A-Za-z0-9_\-./,:+=@%^'
_PLAIN_LINE = re.compile(r'[%s \t]*' % _SAFE)
_TOKEN = re.compile(r'''
    (?P<blank>[ \t]+)
  | (?P<plain>[%s]+)
  | '(?P<single>[^'\n]*)'
  | "(?P<double>(?:[^"\\$`\n]|\\[^\n])*)"
  | \\(?P<escaped>[^\n])
''' % _SAFE, re.VERBOSE)
# A raw shell word (quotes kept), or what ends a simple command: a list or pipeline
# operator, a subshell parenthesis, a newline.  Redirections stay inside words.
_RAW_WORD = re.compile(r'''
    [ \t]*(?:
      (?P<end>&&|\|\||;;|[;&|()\n])
    | (?P<word>(?:[^ \t\n;&|()'"\\]|'[^']*'|"(?:[^"\\]|\\.)*"|\\.)+)
    )''', re.VERBOSE | re.DOTALL)
# Inside double quotes a backslash only escapes these; before anything else it is literal.
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([$`"\\])')

# A first word the shell would not look up on PATH: reserved words and the builtins of
# dash and of bash (either may be /bin/sh).  `echo`, `true`, `test`, `printf`, `kill`, `pwd`
# are builtins too: dash's echo expands backslash escapes where /bin/echo does not.
SHELL_WORDS = frozenset('''
    ! { } [[ ]] case do done elif else esac fi for function if in select then time
    until while coproc
    . : [ alias bg bind break builtin caller cd chdir command compgen complete compopt
    continue declare dirs disown echo enable eval exec exit export false fc fg getopts
    hash help history jobs kill let local logout mapfile popd printf pushd pwd read
    readarray readonly return set shift shopt source suspend test times trap true type
    typeset ulimit umask unalias unset wait
'''.split())


def split_simple_command(line):
    """The argv ``sh -c line`` would run (a list of str), or None if it needs a shell."""
    if _PLAIN_LINE.fullmatch(line):
        words = line.split()
    else:
        words = _split_quoted(line)
        if words is None:
            return None
    if not words:
        return None
    first = words[0]
    # '=' in the first word may make it an assignment (FOO=1 cc ...).  A name without a
    # slash can be a builtin or keyword; with a slash the shell executes it as a path.
    if not first or '=' in first or ('/' not in first and first in SHELL_WORDS):
        return None
    return words


def _split_quoted(line):
    """Quote removal for the accepted subset; None on anything outside it."""
    words = []
    word = None         # the word being built; None between words ("" is a real word)
    pos, end = 0, len(line)
    match = _TOKEN.match
    while pos < end:
        m = match(line, pos)
        if m is None:
            return None
        pos = m.end()
        kind = m.lastgroup
        if kind == 'blank':
            if word is not None:
                words.append(word)
                word = None
            continue
        text = m.group(kind)
        if kind == 'double':
            text = _DOUBLE_QUOTED_ESCAPE.sub(r'\1', text)
        word = text if word is None else word + text
    if word is not None:
        words.append(word)
    return words


def command_words(line):
    """[(offset, word)] for each word of the first simple command of `line`, up to the
    first operator (``&& || ; & |``), parenthesis or newline.  `word` is the word after
    quote removal, or None when it uses more than the subset split_simple_command takes
    (an expansion, a glob, a redirection...)."""
    words = []
    pos, end = 0, len(line)
    match = _RAW_WORD.match
    while pos < end:
        m = match(line, pos)
        if m is None or m.lastgroup != 'word':
            break               # an operator, an unclosed quote, or only blanks left
        raw = m.group('word')
        value = _split_quoted(raw)
        words.append((m.start('word'), value[0] if value and len(value) == 1 else None))
        pos = m.end()
    return words
