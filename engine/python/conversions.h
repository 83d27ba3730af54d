// The Python package's values as the engine's and back, for the _spawnpool module's
// bindings: paths and words as os.fsencode/os.fsdecode make them, a spawnpool.Command as
// a Command, a Result as a spawnpool.Result (and back, for a Python runner under a
// Session), the types and console the package hands over (_bind), and the wait tick that
// runs Python's signal handlers. Call everything with the GIL held; the globals are set
// once, at import and by _bind(), before any thread runs a command.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/src/command/prepared_command.h"
#include "spawnpool/memory_budget.h"
#include "spawnpool/pool.h"

namespace spawnpool::python {

namespace py = pybind11;

/// The module's import thread: the main thread, the one that runs signal handlers.
extern unsigned long g_main_thread;
/// What the package hands over by _bind() (never freed): spawnpool.Result and
/// spawnpool.Command (command.py), output_sync.py's console_message and output_block.
extern PyObject* g_result_type;
extern PyObject* g_empty_tuple;
extern PyObject* g_command_type;
extern PyObject* g_console_message;
extern PyObject* g_console_block;
/// Interns the attribute and field names (once, at import).
void make_names();

std::string fs_bytes(py::handle item);            ///< os.fsencode()
py::object fs_str(const std::string& bytes);      ///< os.fsdecode()
py::object py_bytes(std::string_view data);
std::vector<std::string> to_argv(py::handle argv);
std::vector<std::string> to_env(py::handle env);  ///< a mapping as "NAME=value" entries

/// A spawnpool.Command (or anything with its four attributes) as the engine's Command;
/// env None is the driver's environment, copied now (with the GIL held).
spawnpool::Command to_command(py::handle command);
/// Its `local`: whether it counts against the local slots (true when it has none).
spawnpool::SubmitOptions to_submit_options(py::handle command);
/// The engine's Result as a spawnpool.Result (fields left out keep the class defaults).
py::object to_python(const spawnpool::Result& r, spawnpool::OutputMode output);
/// What runs, as a spawnpool.Command for a Python runner.
py::object to_python_command(const spawnpool::detail::PreparedCommand& prepared);
/// A Python runner's spawnpool.Result as the engine's.
spawnpool::Result from_python(py::handle result);

/// None, "off", "auto", a size ("8G", "512M") or a number of bytes.
spawnpool::MemoryBudget to_memory_budget(py::handle value);
/// A path argument: None is "", else os.fsencode().
std::string optional_path(py::handle path);
/// One write per warning to stderr, each line starting with `prefix`.
std::function<void(const std::string&)> warnings_to_stderr(std::string prefix);
/// What a command run after Pool.close() gets.
spawnpool::Result closed_result();

bool on_main_thread();
/// Runs Python's pending signal handlers while a command runs. A handler that raises
/// (KeyboardInterrupt) interrupts the command with SIGINT; the exception is kept in
/// `raised`, to be re-raised once the command has ended.
spawnpool::WaitTick tick_for(std::optional<py::error_already_set>& raised);

}  // namespace spawnpool::python
