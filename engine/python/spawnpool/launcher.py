"""Compiler launchers (distcc, ccache, icecc, ...) and which commands are compiles: the
engine's (engine/src/command/launcher.h, compile_classifier.h), for Python callers.

Like CMake's ``<LANG>_COMPILER_LAUNCHER``: a compile ``gcc -c a.c`` runs as ``distcc gcc
-c a.c``; every other command as it is.  The rules (what a compiler is, where a launcher
goes in a line, distcc's exit codes and fallbacks, the driver variables a launcher gets)
are the engine's alone; a build's session applies them in C++ (stack.py).

    CompileClassifier(extra_compilers=())   is_compile(line), compile_offset(line) (an
                                            index or None), is_compiler(program)
    Launcher(command, classifier=None, path=None, environ=None)
        name, found, is_distcc, prefix, words; wrap(line) (the launched line or None),
        environment(env), ran_locally(output bytes), failure(status) (a sentence or None).
        `path` is where its program is looked up (default: environ's PATH), `environ` the
        driver's variables it passes on (default: os.environ).  ValueError for an empty
        command or one with shell syntax.

Immutable once made: safe from any thread.
"""

from .pool import _spawnpool

__all__ = ['CompileClassifier', 'Launcher']

CompileClassifier = _spawnpool.CompileClassifier
Launcher = _spawnpool.Launcher
