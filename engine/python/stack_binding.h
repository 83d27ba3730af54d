// The engine's command stack for the package (stack.py, gate.py, direct_exec.py,
// launcher.py, shell.py): _spawnpool.Session (engine/src/stack/session.h) on a Pool or on
// a Python runner called back with the GIL, Launcher, CompileClassifier, and the shell
// functions. Thread-safe as the engine's layers: a Session's run() from many threads.
#pragma once

#include <pybind11/pybind11.h>

namespace spawnpool::python {

/// Adds Session, Launcher, CompileClassifier, split_simple_command, direct_argv and
/// sh_status to the module.
void bind_stack(pybind11::module_& m);
/// Routes the engine's console writes (console.h) to the package's console, once _bind()
/// has handed it over.
void bind_console();

}  // namespace spawnpool::python
