#include "engine/python/stack_binding.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/python/conversions.h"
#include "engine/python/pool_binding.h"
#include "engine/python/statistics_binding.h"
#include "engine/src/command/compile_classifier.h"
#include "engine/src/command/console.h"
#include "engine/src/command/direct_exec.h"
#include "engine/src/command/launcher.h"
#include "engine/src/command/prepare_command.h"
#include "engine/src/command/shell_invocation.h"
#include "engine/src/command/shell_words.h"
#include "engine/src/stack/pool_layer.h"
#include "engine/src/stack/session.h"
#include "spawnpool/session.h"

namespace spawnpool::python {
namespace {

// The bottom of a Session on a Python runner (PopenRunner, FakeRunner, any object with
// run(command) -> Result): each command is handed over with the GIL. An exception the
// runner raises goes up through the layers to the caller (they keep nothing half-done).
class PythonRunnerLayer : public spawnpool::detail::Layer {
 public:
  explicit PythonRunnerLayer(py::object runner) : runner_(std::move(runner)) {}
  // Made and destroyed with the GIL held (by PySession); run() takes it itself.
  spawnpool::Result run(spawnpool::detail::PreparedCommand& command) override {
    py::gil_scoped_acquire acquire;
    return from_python(runner_.attr("run")(to_python_command(command)));
  }

 private:
  py::object runner_;
};

// The bottom of a Session on a spawnpool.Pool: the engine's PoolLayer on it while it is
// open. Not an owner: Pool.close() lets the pool go as soon as no command holds it (as
// PyPool::run); after that a command is a pool_closed Result.
class OpenPoolLayer : public spawnpool::detail::Layer {
 public:
  explicit OpenPoolLayer(std::weak_ptr<spawnpool::Pool> pool) : pool_(std::move(pool)) {}
  spawnpool::Result run(spawnpool::detail::PreparedCommand& command) override {
    const std::shared_ptr<spawnpool::Pool> pool = pool_.lock();
    if (!pool) return closed_result();
    return spawnpool::detail::PoolLayer(*pool).run(command);
  }

 private:
  std::weak_ptr<spawnpool::Pool> pool_;
};

// None: no base yet (stack.py makes the session before its pool; rebase() gives it one):
// a command run before then is a pool_closed Result.
std::unique_ptr<spawnpool::detail::Layer> bottom_layer(py::handle base) {
  if (base.is_none()) return std::make_unique<OpenPoolLayer>(std::weak_ptr<spawnpool::Pool>());
  if (py::isinstance<PyPool>(base))
    if (std::shared_ptr<spawnpool::Pool> pool = base.cast<PyPool&>().shared_pool())
      return std::make_unique<OpenPoolLayer>(std::move(pool));
  return std::make_unique<PythonRunnerLayer>(py::reinterpret_borrow<py::object>(base));
}

std::vector<std::string> string_list(py::handle items) {
  std::vector<std::string> out;
  if (!items.is_none())
    for (py::handle item : items) out.push_back(py::str(item));
  return out;
}

// The engine's console writes, while the package owns the console (g_console_*).
void message_to_python(std::string_view text) {
  py::gil_scoped_acquire acquire;
  try {
    py::reinterpret_borrow<py::object>(g_console_message)(
        py::reinterpret_steal<py::object>(
            PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace")));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("spawnpool: a console message");
  }
}

// A read-only memoryview of `data` (no copy), for the length of one call.
py::object borrowed_view(std::string_view data) {
  PyObject* view = PyMemoryView_FromMemory(const_cast<char*>(data.data()),
                                           static_cast<Py_ssize_t>(data.size()), PyBUF_READ);
  if (!view) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(view);
}

// The block is handed over as views of the layer's buffers (no copy), released once the
// writer returns, so that a view that outlived the call reads nothing. The writer is the
// package's (output_sync.output_block) and keeps none: release() would refuse a view
// with slices of it still alive (BufferError, reported as unraisable).
void block_to_python(std::string_view out, std::string_view err) {
  py::gil_scoped_acquire acquire;
  py::object views[2];
  try {
    views[0] = borrowed_view(out);
    views[1] = borrowed_view(err);
    py::reinterpret_borrow<py::object>(g_console_block)(views[0], views[1]);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("spawnpool: a command's output block");
  }
  for (py::object& view : views) {
    if (!view) continue;
    try {
      view.attr("release")();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("spawnpool: a command's output block");
    }
  }
}

// A launcher as the package's launcher.py has it: the engine's Launcher, the classifier
// it wraps lines with, and what a Session needs to make its own (the command, the
// driver's environment, the extra compilers).
struct PyLauncher {
  std::string command;
  std::vector<std::string> driver_environment;
  std::vector<std::string> compilers;
  spawnpool::detail::CompileClassifier classifier;
  spawnpool::detail::Launcher launcher;

  PyLauncher(std::string command_, std::vector<std::string> driver_env,
             std::vector<std::string> compilers_)
      : command(std::move(command_)),
        driver_environment(std::move(driver_env)),
        compilers(std::move(compilers_)),
        classifier(compilers),
        launcher(command, driver_environment) {}
};

struct PyClassifier {
  std::vector<std::string> compilers;
  spawnpool::detail::CompileClassifier classifier;
  explicit PyClassifier(std::vector<std::string> extra)
      : compilers(std::move(extra)), classifier(compilers) {}
  std::optional<std::size_t> compile_offset(const std::string& line) const {
    const std::size_t at = classifier.compile_offset(line, spawnpool::detail::shell_tokens(line));
    if (at == std::string::npos) return std::nullopt;
    return at;
  }
};

// The session's warnings to the package's `warn` (called with the GIL, on the thread that
// makes or finishes the session); the sentence decoded as file names are.
std::function<void(const std::string&)> warn_hook(py::object warn) {
  if (warn.is_none()) return {};
  std::shared_ptr<py::object> callable(new py::object(std::move(warn)), [](py::object* object) {
    py::gil_scoped_acquire acquire;
    delete object;
  });
  return [callable](const std::string& sentence) {
    py::gil_scoped_acquire acquire;
    try {
      (*callable)(fs_str(sentence));
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("spawnpool: a session's warning");
    }
  };
}

// The recording's options of a PySession: the trace and the report, as files.
struct PyRecording {
  py::object trace_path, report_path;
  std::string process_name, command_line, option_prefix;
  py::object warn;
};

// One build's stack (session.h) for stack.py: run() through every layer, run_checks()
// below the launcher. The command is read with the GIL held (to_command), then the
// layers run without it; the trace and the statistics (the engine's trace, stats=: the
// package's BuildStatistics, shared) record there, and take the GIL only for
// `command_args`, when one is given. The trace and the report are the engine's
// (trace_recording.h): opened here, written by finish().
class PySession {
 public:
  PySession(py::handle base, py::handle launcher, py::handle compilers, bool direct_exec,
            bool output_sync, std::string prefix, py::handle stats, py::object command_args,
            PyRecording recording) {
    spawnpool::detail::SessionOptions options;
    if (!recording.trace_path.is_none()) options.trace_path = fs_bytes(recording.trace_path);
    if (!recording.report_path.is_none()) options.report_path = fs_bytes(recording.report_path);
    options.trace_process_name = std::move(recording.process_name);
    options.trace_command_line = std::move(recording.command_line);
    options.option_prefix = std::move(recording.option_prefix);
    options.warn = warn_hook(std::move(recording.warn));
    options.statistics = statistics_of(stats);
    // Recorded below the launcher, without the GIL; the hook takes it.
    if (!options.trace_path.empty() || !options.report_path.empty())
      options.trace_args = trace_args_hook(std::move(command_args));
    options.direct_exec = direct_exec;
    options.output_sync = output_sync;
    options.message_prefix = std::move(prefix);
    options.compilers = string_list(compilers);
    if (py::isinstance<PyLauncher>(launcher)) {
      const PyLauncher& given = launcher.cast<const PyLauncher&>();
      options.launcher = given.command;
      options.driver_environment = given.driver_environment;
      options.compilers.insert(options.compilers.end(), given.compilers.begin(),
                               given.compilers.end());
    } else if (!launcher.is_none()) {
      options.launcher = py::str(launcher);
      options.driver_environment = spawnpool::current_environment();  // with the GIL
    }
    base_ = bottom_layer(base);
    session_ = std::make_unique<spawnpool::detail::Session>(*base_, std::move(options));
  }

  py::object run(py::handle command_object, bool checks) {
    spawnpool::Command command = to_command(command_object);
    const spawnpool::OutputMode output = command.output;
    spawnpool::detail::PreparedCommand prepared = session_->prepare(std::move(command));
    prepared.local = to_submit_options(command_object).local;
    std::optional<py::error_already_set> raised;
    spawnpool::WaitTick tick;
    if (on_main_thread()) {
      tick = tick_for(raised);
      prepared.wait_tick = &tick;
    }
    spawnpool::detail::Layer& layer = checks ? session_->checks_runner() : session_->runner();
    spawnpool::Result r;
    PyThreadState* saved = PyEval_SaveThread();  // by hand: see PyPool::run
    try {
      r = layer.run(prepared);
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    if (raised) throw std::move(*raised);
    // In the caller's form: a command it let print was printed (the sync layer's block, a
    // distcc compile's), so its bytes, which the trace has read, are not converted.
    if (output == spawnpool::OutputMode::kPassthrough) r.captured = false;
    return to_python(r, output);
  }

  /// Puts the layers on another base (no command may be running).
  void rebase(py::handle base) {
    std::unique_ptr<spawnpool::detail::Layer> layer = bottom_layer(base);
    session_->rebase(*layer);
    base_ = std::move(layer);
  }

  py::object summary() const {
    if (!session_->launcher()) return py::none();
    return py::str(session_->launcher_summary());
  }
  py::tuple counts() const {
    const spawnpool::detail::LauncherCounts c = session_->launcher_counts();
    return py::make_tuple(c.launched, c.ran_locally, c.launcher_failed, c.local_commands);
  }
  py::object launcher_name() const {
    const spawnpool::detail::Launcher* l = session_->launcher();
    return l ? py::object(py::str(l->name())) : py::object(py::none());
  }
  bool launcher_found() const {
    const spawnpool::detail::Launcher* l = session_->launcher();
    return l && l->found();
  }
  bool direct_exec() const { return session_->direct_exec(); }
  bool output_sync() const { return session_->output_sync(); }
  std::shared_ptr<spawnpool::detail::TraceWriter> trace() const { return session_->trace(); }
  /// Closes the trace and writes the report (its problems: `warn`).
  void finish() {
    py::gil_scoped_release release;  // the report reads the whole trace
    session_->finish();
  }

 private:
  std::unique_ptr<spawnpool::detail::Layer> base_;  // declared first: destroyed last
  std::unique_ptr<spawnpool::detail::Session> session_;
};

}  // namespace

void bind_stack(py::module_& m) {
  using spawnpool::detail::Launcher;
  py::class_<PySession>(m, "Session")
      .def(py::init([](py::handle base, py::handle launcher, py::handle compilers,
                       bool direct_exec, bool output_sync, std::string prefix, py::handle stats,
                       py::object command_args, py::object trace_path, py::object report_path,
                       std::string process_name, std::string command_line,
                       std::string option_prefix, py::object warn) {
             return std::make_unique<PySession>(
                 base, launcher, compilers, direct_exec, output_sync, std::move(prefix), stats,
                 std::move(command_args),
                 PyRecording{std::move(trace_path), std::move(report_path),
                             std::move(process_name), std::move(command_line),
                             std::move(option_prefix), std::move(warn)});
           }),
           py::arg("base") = py::none(), py::arg("launcher") = py::none(),
           py::arg("compilers") = py::none(), py::arg("direct_exec") = true,
           py::arg("output_sync") = false, py::arg("prefix") = "spawnpool",
           py::arg("stats") = py::none(), py::arg("command_args") = py::none(),
           py::arg("trace_path") = py::none(), py::arg("report_path") = py::none(),
           py::arg("process_name") = "spawnpool", py::arg("command_line") = "",
           py::arg("option_prefix") = "--", py::arg("warn") = py::none())
      .def("run", [](PySession& s, py::handle command) { return s.run(command, false); },
           py::arg("command"), "Run a build command through every layer.")
      .def("run_checks", [](PySession& s, py::handle command) { return s.run(command, true); },
           py::arg("command"), "Run a command through the layers below the launcher.")
      .def("rebase", &PySession::rebase, py::arg("base"))
      .def_property_readonly("summary", &PySession::summary)
      .def_property_readonly("counts", &PySession::counts,
                             "(launched, ran_locally, launcher_failed, local_commands)")
      .def_property_readonly("launcher_name", &PySession::launcher_name)
      .def_property_readonly("launcher_found", &PySession::launcher_found)
      .def_property_readonly("direct_exec", &PySession::direct_exec)
      .def_property_readonly("output_sync", &PySession::output_sync)
      .def_property_readonly("trace", &PySession::trace,
                             "The engine's TraceWriter being recorded, or None.")
      .def("finish", &PySession::finish,
           "The end of the build: the trace closed, the report written (idempotent).");

  py::class_<PyClassifier>(m, "CompileClassifier")
      .def(py::init([](py::handle extra) { return PyClassifier(string_list(extra)); }),
           py::arg("extra_compilers") = py::tuple())
      .def("is_compiler", [](const PyClassifier& c, const std::string& program) {
             return c.classifier.is_compiler(program);
           }, py::arg("program"))
      .def("compile_offset", &PyClassifier::compile_offset, py::arg("line"))
      .def("is_compile", [](const PyClassifier& c, const std::string& line) {
             return c.compile_offset(line).has_value();
           }, py::arg("line"));

  py::class_<PyLauncher>(m, "Launcher")
      .def(py::init([](const std::string& command, py::handle classifier, py::handle path,
                       py::handle environ) {
             std::vector<std::string> driver_env =
                 environ.is_none() ? spawnpool::current_environment() : to_env(environ);
             if (!path.is_none()) {
               const std::size_t at = spawnpool::detail::environment_index(driver_env, "PATH");
               std::string entry = "PATH=" + fs_bytes(path);
               if (at < driver_env.size()) driver_env[at] = std::move(entry);
               else driver_env.push_back(std::move(entry));
             }
             std::vector<std::string> compilers;
             if (!classifier.is_none()) compilers = classifier.cast<const PyClassifier&>().compilers;
             return std::make_unique<PyLauncher>(command, std::move(driver_env), std::move(compilers));
           }),
           py::arg("command"), py::arg("classifier") = py::none(), py::arg("path") = py::none(),
           py::arg("environ") = py::none())
      .def_property_readonly("name", [](const PyLauncher& l) { return l.launcher.name(); })
      .def_property_readonly("found", [](const PyLauncher& l) { return l.launcher.found(); })
      .def_property_readonly("is_distcc", [](const PyLauncher& l) { return l.launcher.is_distcc(); })
      .def_property_readonly("prefix", [](const PyLauncher& l) { return l.launcher.prefix(); })
      .def_property_readonly("words", [](const PyLauncher& l) { return l.launcher.words(); })
      .def("wrap", [](const PyLauncher& l, const std::string& line) -> py::object {
             const std::size_t at =
                 l.classifier.compile_offset(line, spawnpool::detail::shell_tokens(line));
             if (at == std::string::npos) return py::none();
             return py::str(line.substr(0, at) + l.launcher.prefix() + ' ' + line.substr(at));
           }, py::arg("line"), "The line with the launcher put in if it is a compile, else None.")
      .def("environment", [](const PyLauncher& l, py::handle env) -> py::object {
             std::vector<std::string> entries = to_env(env);
             const std::size_t had = entries.size();
             l.launcher.add_environment(entries);
             if (entries.size() == had) return py::reinterpret_borrow<py::object>(env);
             py::dict copy;  // the caller's mapping stays as it was
             for (py::handle key : env) copy[key] = env[key];
             for (std::size_t i = had; i < entries.size(); ++i) {
               const std::size_t eq = entries[i].find('=');
               copy[fs_str(entries[i].substr(0, eq))] = fs_str(entries[i].substr(eq + 1));
             }
             return std::move(copy);
           }, py::arg("env"), "`env` plus the driver's launcher variables it lacks.")
      .def("ran_locally", [](const PyLauncher& l, py::handle output) {
             return !output.is_none() && l.launcher.ran_locally(output.cast<std::string>());
           }, py::arg("output"))
      .def("failure", [](const PyLauncher& l, int status) -> py::object {
             const std::string text = l.launcher.failure(status);
             return text.empty() ? py::object(py::none()) : py::object(py::str(text));
           }, py::arg("status"));

  m.def("default_local_slots", &spawnpool::default_local_slots, py::arg("launcher"),
        "The local slots of a build that names none: with a launcher, the usable CPUs; "
        "else 0 (no bound).");
  m.def("history_path", [](const std::string& setting, const std::string& default_path,
                           py::handle base_dir, bool memory, bool status_shown,
                           const std::string& option_prefix, py::object warn) -> py::object {
          spawnpool::HistoryOptions options{setting, default_path,
                                            base_dir.is_none() ? "" : fs_bytes(base_dir),
                                            memory, status_shown, option_prefix};
          const std::string path = spawnpool::history_path(options, warn_hook(std::move(warn)));
          if (path.empty()) return py::none();
          return fs_str(path);
        }, py::arg("setting"), py::arg("default_path"), py::arg("base_dir"), py::arg("memory"),
        py::arg("status_shown"), py::arg("option_prefix") = "--", py::arg("warn") = py::none(),
        "The build's history file, or None (spawnpool::history_path, session.h).");
  m.def("split_simple_command", [](py::handle line) -> py::object {
          const auto words = spawnpool::detail::split_simple_command(fs_bytes(line));
          if (!words) return py::none();
          py::list out;
          for (const std::string& w : *words) out.append(fs_str(w));
          return std::move(out);
        }, py::arg("line"), "The argv `sh -c line` would run, or None if it needs a shell.");
  m.def("direct_argv", [](py::handle argv) -> py::object {
          const std::vector<std::string> args = to_argv(argv);
          const auto shell = spawnpool::detail::shell_invocation(args);
          if (!shell || !shell->as_dash) return py::none();
          const auto words = spawnpool::detail::split_simple_command(args[shell->line_index]);
          if (!words) return py::none();
          py::list out;
          for (const std::string& w : *words) out.append(fs_str(w));
          return std::move(out);
        }, py::arg("argv"), "The program's argv if argv is [sh, -c, line] with a simple line.");
  m.def("sh_status", [](int returncode) {
          const spawnpool::detail::ShStatus sh = spawnpool::detail::sh_status(returncode);
          return py::make_tuple(sh.returncode, sh.message.empty() ? py::object(py::none())
                                                                  : py_bytes(sh.message));
        }, py::arg("returncode"), "(status sh would return, message it would print or None).");
}

void bind_console() {
  if (g_console_message && g_console_block)
    spawnpool::detail::console::set_writer({message_to_python, block_to_python});
}

}  // namespace spawnpool::python
