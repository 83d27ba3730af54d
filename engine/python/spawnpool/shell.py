"""Reading shell command lines: the engine's one shell-word parser
(engine/src/command/shell_words.h), for Python callers.

`split_simple_command(line)` returns the argv that ``sh -c LINE`` would execute, or None
when the line uses anything only a shell can do (expansions, redirections, pipes, lists,
globbing, assignments, builtins, keywords...).  It accepts a deliberately small subset of
the POSIX shell grammar in which quote removal can be undone exactly, so that whenever it
answers, the answer is the shell's (shell_words.h says which subset).

Pure function: safe from any thread.
"""

from .pool import _spawnpool

__all__ = ['split_simple_command']

split_simple_command = _spawnpool.split_simple_command
