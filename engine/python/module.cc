// _spawnpool: the compiled half of the `spawnpool` Python package. Pool.run(command) reads
// a spawnpool.Command and returns a spawnpool.Result; a command that never started is a
// Result carrying its failure, never an exception. Session is one build's C++ stack of
// layers (engine/src/stack/session.h) on a Pool, or on a Python runner (PopenRunner, the
// tests' FakeRunner) called back with the GIL; Launcher, CompileClassifier and the shell
// functions are the engine's, for the package's thin modules (launcher.py, shell.py,
// direct_exec.py). Arguments are turned into C++ values
// with the GIL held; every wait then runs with the GIL released. On the main thread the
// wait wakes every 100 ms to let Python run its signal handlers. The pool's warnings (its
// memory history, missing cgroups) are written to stderr by the engine itself, with the
// caller's prefix: they may come from the history's writer thread, which must not call
// into Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/src/command/compile_classifier.h"
#include "engine/src/command/console.h"
#include "engine/src/command/direct_exec.h"
#include "engine/src/command/launcher.h"
#include "engine/src/command/prepare_command.h"
#include "engine/src/command/shell_invocation.h"
#include "engine/src/command/shell_words.h"
#include "engine/src/history/history_store.h"
#include "engine/src/progress/build_progress.h"
#include "engine/src/progress/status_printer.h"
#include "engine/src/report/build_report.h"
#include "engine/src/stack/pool_layer.h"
#include "engine/src/stack/session.h"
#include "spawnpool/jobserver.h"
#include "spawnpool/pool.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace py = pybind11;

namespace {

unsigned long g_main_thread = 0;

// os.fsencode(): str with the filesystem encoding (surrogateescape), bytes as they are,
// PathLike through os.fspath.
std::string fs_bytes(py::handle item) {
  py::object path = py::reinterpret_steal<py::object>(PyOS_FSPath(item.ptr()));
  if (!path) throw py::error_already_set();
  if (PyBytes_Check(path.ptr()))
    return std::string(PyBytes_AS_STRING(path.ptr()), PyBytes_GET_SIZE(path.ptr()));
  py::object encoded = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(path.ptr()));
  if (!encoded) throw py::error_already_set();
  return std::string(PyBytes_AS_STRING(encoded.ptr()), PyBytes_GET_SIZE(encoded.ptr()));
}

std::vector<std::string> to_argv(py::handle argv) {
  if (py::isinstance<py::str>(argv) || py::isinstance<py::bytes>(argv))
    throw py::type_error("argv must be a sequence of arguments, not a string");
  std::vector<std::string> out;
  for (py::handle item : argv) out.push_back(fs_bytes(item));
  return out;
}

std::vector<std::string> to_env(py::handle env) {
  std::vector<std::string> out;
  py::object items = env.attr("items")();
  for (py::handle pair : items) {
    std::string key = fs_bytes(pair[py::int_(0)]);
    if (key.empty() || key.find('=') != std::string::npos)
      throw py::value_error("illegal environment variable name");
    out.push_back(std::move(key) + "=" + fs_bytes(pair[py::int_(1)]));
  }
  return out;
}

// spawnpool.Result (command.py), handed over once by the package's pool.py
// (_bind(Result)): results are made as it, so that every runner, compiled or not, returns
// the same type. Commands are read by their four attributes (to_command), so a
// spawnpool.Command or anything shaped like it will do. Never freed (module lifetime).
PyObject* g_result_type = nullptr;
PyObject* g_empty_tuple = nullptr;
// spawnpool.Command, for the commands a Python runner under a Session is given, and the
// package's console (output_sync.py: console_message, output_block), where the engine's
// layers print while Python owns the console. Handed over by _bind(); never freed.
PyObject* g_command_type = nullptr;
PyObject* g_console_message = nullptr;
PyObject* g_console_block = nullptr;

// Interned attribute and field names, made once.
struct Names {
  PyObject *argv, *env, *cwd, *output, *local;
  PyObject *returncode, *failure, *error_number, *error_message, *stdout_, *stderr_,
      *user_time, *system_time, *wall_time, *max_rss_kb, *slot, *submitted_ns,
      *dispatched_ns, *received_ns, *launch_ns, *started_ns, *exited_ns, *completed_ns;
  PyObject *peak_memory_bytes, *memory_source, *oom_killed, *oom_retries,
      *predicted_peak_bytes, *memory_wait_ns, *predicted_in_use_bytes,
      *measured_in_use_bytes, *slot_wait_ns, *local_slot_wait_ns, *jobserver_wait_ns;
  PyObject* source_names[4];  // "none" is never set: the field's default is None
};
Names g_names;

PyObject* intern(const char* name) { return PyUnicode_InternFromString(name); }

void make_names() {
  g_names = Names{intern("argv"),          intern("env"),          intern("cwd"),
                  intern("output"),        intern("local"),        intern("returncode"),   intern("failure"),
                  intern("error_number"),  intern("error_message"), intern("stdout"),
                  intern("stderr"),        intern("user_time"),    intern("system_time"),
                  intern("wall_time"),     intern("max_rss_kb"),   intern("slot"),
                  intern("submitted_ns"),  intern("dispatched_ns"), intern("received_ns"),
                  intern("launch_ns"),     intern("started_ns"),   intern("exited_ns"),
                  intern("completed_ns"),  intern("peak_memory_bytes"), intern("memory_source"),
                  intern("oom_killed"),    intern("oom_retries"),  intern("predicted_peak_bytes"),
                  intern("memory_wait_ns"), intern("predicted_in_use_bytes"),
                  intern("measured_in_use_bytes"), intern("slot_wait_ns"),
                  intern("local_slot_wait_ns"), intern("jobserver_wait_ns"),
                  {nullptr, intern("rusage"), intern("cgroup"), intern("cgroup_sampled")}};
}

py::object attribute(py::handle object, PyObject* name) {
  PyObject* value = PyObject_GetAttr(object.ptr(), name);
  if (!value) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

spawnpool::OutputMode to_output_mode(py::handle mode) {
  const std::string name = py::str(mode);
  if (name == "passthrough") return spawnpool::OutputMode::kPassthrough;
  if (name == "capture") return spawnpool::OutputMode::kCapture;
  if (name == "capture_merged") return spawnpool::OutputMode::kCaptureMerged;
  throw py::value_error("output must be 'passthrough', 'capture' or 'capture_merged', not '" +
                        name + "'");
}

/// A spawnpool.Command (or anything with its four attributes) as the engine's Command.
spawnpool::Command to_command(py::handle command) {
  spawnpool::Command out;
  out.argv = to_argv(attribute(command, g_names.argv));
  py::object env = attribute(command, g_names.env);
  // No env: the driver's, copied now, with the GIL held: os.environ's putenv runs under
  // it, so no other Python thread changes environ during the copy (the engine would
  // make it after the GIL is released).
  out.env = env.is_none() ? spawnpool::current_environment() : to_env(env);
  py::object cwd = attribute(command, g_names.cwd);
  if (!cwd.is_none()) out.cwd = fs_bytes(cwd);
  out.output = to_output_mode(attribute(command, g_names.output));
  return out;
}

/// Its `local` (command.py): whether it counts against the local slots; true when the
/// object has none.
spawnpool::SubmitOptions to_submit_options(py::handle command) {
  spawnpool::SubmitOptions how;
  PyObject* local = PyObject_GetAttr(command.ptr(), g_names.local);
  if (!local) {
    PyErr_Clear();
    return how;
  }
  how.local = PyObject_IsTrue(local) != 0;
  Py_DECREF(local);
  return how;
}

void set_field(PyObject* fields, PyObject* name, PyObject* value) {
  if (!value || PyDict_SetItem(fields, name, value) != 0) {
    Py_XDECREF(value);
    throw py::error_already_set();
  }
  Py_DECREF(value);
}

// The memory fields: the peak and its source always (from ru_maxrss without a budget),
// the admission's only where set, so that a pool without a budget pays two fields.
void set_memory_fields(PyObject* d, const spawnpool::Result& r) {
  const auto source = static_cast<std::size_t>(r.memory_source);
  if (source == 0 || source > 3) return;
  set_field(d, g_names.peak_memory_bytes, PyLong_FromLongLong(r.peak_memory_bytes));
  Py_INCREF(g_names.source_names[source]);
  set_field(d, g_names.memory_source, g_names.source_names[source]);
  if (r.oom_killed) {
    set_field(d, g_names.oom_killed, PyBool_FromLong(1));
    set_field(d, g_names.error_message,
              PyUnicode_DecodeUTF8(r.error_message.data(), r.error_message.size(), "replace"));
  }
  if (r.oom_retries) set_field(d, g_names.oom_retries, PyLong_FromLong(r.oom_retries));
  if (r.predicted_peak_bytes)
    set_field(d, g_names.predicted_peak_bytes, PyLong_FromLongLong(r.predicted_peak_bytes));
  if (r.predicted_in_use_bytes)
    set_field(d, g_names.predicted_in_use_bytes, PyLong_FromLongLong(r.predicted_in_use_bytes));
  if (r.measured_in_use_bytes)
    set_field(d, g_names.measured_in_use_bytes, PyLong_FromLongLong(r.measured_in_use_bytes));
}

/// The engine's Result as a spawnpool.Result (fields left out keep the class defaults).
py::object to_python(const spawnpool::Result& r, spawnpool::OutputMode output) {
  py::object fields = py::reinterpret_steal<py::object>(PyDict_New());
  if (!fields) throw py::error_already_set();
  PyObject* d = fields.ptr();
  set_field(d, g_names.returncode, PyLong_FromLong(r.returncode));
  if (!r.started()) {
    set_field(d, g_names.failure, PyUnicode_FromString(spawnpool::stage_name(r.failure)));
    set_field(d, g_names.error_number, PyLong_FromLong(r.error_number));
    set_field(d, g_names.error_message,
              PyUnicode_DecodeUTF8(r.error_message.data(), r.error_message.size(), "replace"));
  }
  if (r.captured) {
    set_field(d, g_names.stdout_, PyBytes_FromStringAndSize(r.stdout_data.data(),
                                                             r.stdout_data.size()));
    if (output == spawnpool::OutputMode::kCapture)
      set_field(d, g_names.stderr_, PyBytes_FromStringAndSize(r.stderr_data.data(),
                                                               r.stderr_data.size()));
  }
  set_field(d, g_names.user_time, PyFloat_FromDouble(r.user_time));
  set_field(d, g_names.system_time, PyFloat_FromDouble(r.system_time));
  set_field(d, g_names.wall_time, PyFloat_FromDouble(r.wall_time));
  set_field(d, g_names.max_rss_kb, PyLong_FromLong(r.max_rss_kb));
  set_field(d, g_names.slot, PyLong_FromLong(r.slot));
  const std::pair<PyObject*, std::int64_t> timestamps[] = {
      {g_names.submitted_ns, r.submitted_ns}, {g_names.dispatched_ns, r.dispatched_ns},
      {g_names.received_ns, r.received_ns},   {g_names.launch_ns, r.launch_ns},
      {g_names.started_ns, r.started_ns},     {g_names.exited_ns, r.exited_ns},
      {g_names.completed_ns, r.completed_ns}};
  for (const auto& [name, ns] : timestamps) set_field(d, name, PyLong_FromLongLong(ns));
  // What it waited for (the scheduler's reasons), where it waited at all.
  const std::pair<PyObject*, std::int64_t> waits[] = {
      {g_names.slot_wait_ns, r.slot_wait_ns}, {g_names.memory_wait_ns, r.memory_wait_ns},
      {g_names.local_slot_wait_ns, r.local_slot_wait_ns},
      {g_names.jobserver_wait_ns, r.jobserver_wait_ns}};
  for (const auto& [name, ns] : waits)
    if (ns) set_field(d, name, PyLong_FromLongLong(ns));
  set_memory_fields(d, r);
  if (!g_result_type) throw py::type_error("spawnpool._spawnpool is used without the package");
  PyObject* result = PyObject_Call(g_result_type, g_empty_tuple, d);
  if (!result) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

/// None, "off", "auto", a size ("8G", "512M") or a number of bytes.
spawnpool::MemoryBudget to_memory_budget(py::handle value) {
  if (value.is_none()) return spawnpool::MemoryBudget::off();
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    const long long bytes = value.cast<long long>();
    if (bytes <= 0) throw py::value_error("memory_budget must be positive, not " + std::to_string(bytes));
    return spawnpool::MemoryBudget::of_bytes(static_cast<std::uint64_t>(bytes));
  }
  if (!py::isinstance<py::str>(value))
    throw py::type_error("memory_budget must be None, 'auto', 'off', a size or bytes");
  const std::string text = value.cast<std::string>();
  const std::optional<spawnpool::MemoryBudget> parsed = spawnpool::MemoryBudget::parse(text);
  if (!parsed)
    throw py::value_error("memory budget '" + text +
                          "' is not auto, off, or a size such as 8G or 512M");
  return *parsed;
}

std::string optional_path(py::handle path) { return path.is_none() ? std::string() : fs_bytes(path); }

// One write per warning, so that lines from several threads never mix.
std::function<void(const std::string&)> warnings_to_stderr(std::string prefix) {
  return [prefix = std::move(prefix)](const std::string& message) {
    const std::string line = prefix + message + "\n";
    (void)!write(2, line.data(), line.size());
  };
}

// What a command run after Pool.close() gets.
spawnpool::Result closed_result() {
  spawnpool::Result closed;
  closed.failure = spawnpool::FailureStage::kPoolClosed;
  closed.error_number = ESHUTDOWN;
  closed.error_message = "the pool is closed";
  return closed;
}

bool on_main_thread() { return PyThread_get_thread_ident() == g_main_thread; }

// Runs Python's pending signal handlers. A handler that raises (KeyboardInterrupt)
// interrupts the command with SIGINT; the exception is re-raised once it has ended.
spawnpool::WaitTick tick_for(std::optional<py::error_already_set>& raised) {
  return [&raised]() -> int {
    py::gil_scoped_acquire acquire;
    if (raised || PyErr_CheckSignals() == 0) return 0;
    raised.emplace();
    return SIGINT;
  };
}

class PyPool {
 public:
  PyPool(std::size_t slots, std::string spawner, std::size_t output_chunk_bytes,
         bool same_cpu_handoff, py::handle memory_budget, py::handle history,
         py::handle cgroup_parent, std::string warning_prefix,
         std::shared_ptr<spawnpool::Jobserver> jobserver, std::size_t local_slots,
         int stop_signal_fd, py::handle progress) {
    spawnpool::PoolOptions options;
    options.slots = slots;
    options.spawner_path = std::move(spawner);
    options.output_chunk_bytes = output_chunk_bytes;
    options.same_cpu_handoff = same_cpu_handoff;
    options.memory_budget = to_memory_budget(memory_budget);
    // The history: a History shared with the build's progress, or a path the pool opens.
    if (py::isinstance<spawnpool::detail::HistoryStore>(history))
      options.history = history.cast<std::shared_ptr<spawnpool::detail::HistoryStore>>();
    else
      options.memory_history_path = optional_path(history);
    if (!progress.is_none())
      options.progress = progress.cast<std::shared_ptr<spawnpool::detail::BuildProgress>>();
    options.memory_cgroup_parent = optional_path(cgroup_parent);
    options.warn = warnings_to_stderr(std::move(warning_prefix));
    options.jobserver = std::move(jobserver);
    options.local_slots = local_slots;
    options.stop_signal_fd = stop_signal_fd;
    // Starting a pool with memory admission reads the history (SQLite) and makes cgroups.
    py::gil_scoped_release release;
    pool_ = std::make_shared<spawnpool::Pool>(std::move(options));
    slots_ = pool_->slots();
  }

  /// Runs one command; a command that never started is a Result with its failure.
  py::object run(py::handle command_object) {
    const spawnpool::Command command = to_command(command_object);
    const spawnpool::SubmitOptions how = to_submit_options(command_object);
    std::shared_ptr<spawnpool::Pool> pool = pool_;  // our own: close() may run meanwhile
    if (!pool) return to_python(closed_result(), command.output);
    std::optional<py::error_already_set> raised;
    spawnpool::Result r;
    // The GIL is released and taken back by hand, not by gil_scoped_release: at
    // interpreter exit a daemon thread taking the GIL back is ended by pthread_exit,
    // whose unwinding must not cross a noexcept destructor (std::terminate).
    PyThreadState* saved = PyEval_SaveThread();
    try {
      spawnpool::Job job = pool->submit(command, how);
      r = pool->wait(job, on_main_thread() ? tick_for(raised) : spawnpool::WaitTick{});
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    if (raised) throw std::move(*raised);
    return to_python(r, command.output);
  }

  void cancel(int sig) {
    if (pool_) pool_->cancel_all(sig);
  }
  /// Pool::interrupt(): waiting and later commands come back as killed by `sig`. Takes
  /// only the scheduler's lock, which nobody holds while waiting: safe from a signal
  /// handler (Python runs them between bytecodes, in the main thread).
  void interrupt(int sig) {
    if (std::shared_ptr<spawnpool::Pool> pool = pool_) {
      py::gil_scoped_release release;
      pool->interrupt(sig);
    }
  }
  /// Ends the spawners now and lets the segment go as soon as no run() holds it, rather
  /// than when Python collects this object (a traceback can keep it alive for long).
  void close() {
    std::shared_ptr<spawnpool::Pool> pool = std::move(pool_);
    if (!pool) return;
    py::gil_scoped_release release;
    pool->close();
    pool.reset();
  }
  std::size_t slots() const { return slots_; }
  /// The pool itself, for a Session's bottom layer (null once closed).
  std::shared_ptr<spawnpool::Pool> shared_pool() const { return pool_; }
  std::vector<int> spawner_pids() { return pool_ ? pool_->spawner_pids() : std::vector<int>{}; }

 private:
  std::shared_ptr<spawnpool::Pool> pool_;  // null once closed
  std::size_t slots_ = 0;
};

// --- the engine's stack for the package (stack.py, gate.py, direct_exec.py) -------------

// os.fsdecode(): bytes as str with the filesystem encoding (surrogateescape).
py::object fs_str(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeFSDefaultAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()));
  if (!text) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(text);
}

py::object py_bytes(std::string_view data) {
  return py::reinterpret_steal<py::object>(
      PyBytes_FromStringAndSize(data.data(), static_cast<Py_ssize_t>(data.size())));
}

const char* output_mode_name(spawnpool::OutputMode mode) {
  switch (mode) {
    case spawnpool::OutputMode::kPassthrough: return "passthrough";
    case spawnpool::OutputMode::kCapture: return "capture";
    case spawnpool::OutputMode::kCaptureMerged: return "capture_merged";
  }
  return "passthrough";
}

/// What runs, as a spawnpool.Command for a Python runner: argv and cwd as str, the
/// complete environment as a dict, the output mode, `local`.
py::object to_python_command(const spawnpool::detail::PreparedCommand& prepared) {
  const spawnpool::Command& c = prepared.command;
  py::list argv;
  for (const std::string& a : c.argv) argv.append(fs_str(a));
  py::dict env;
  if (c.env)
    for (const std::string& entry : *c.env) {
      const std::size_t eq = entry.find('=');
      if (eq == std::string::npos) continue;
      env[fs_str(entry.substr(0, eq))] = fs_str(entry.substr(eq + 1));
    }
  if (!g_command_type) throw py::type_error("spawnpool._spawnpool is used without the package");
  return py::reinterpret_borrow<py::object>(g_command_type)(
      argv, env, c.cwd.empty() ? py::object(py::none()) : fs_str(c.cwd),
      output_mode_name(c.output), prepared.local);
}

spawnpool::FailureStage stage_of(py::handle name) {
  if (name.is_none()) return spawnpool::FailureStage::kNone;
  const std::string text = py::str(name);
  for (int i = 1; i <= static_cast<int>(spawnpool::FailureStage::kPoolClosed); ++i) {
    const auto stage = static_cast<spawnpool::FailureStage>(i);
    if (text == spawnpool::stage_name(stage)) return stage;
  }
  return spawnpool::FailureStage::kSpawner;
}

template <typename T>
T field(py::handle result, const char* name) {
  return result.attr(name).cast<T>();
}

/// A spawnpool.Result from a Python runner, as the engine's (the fields the layers and
/// to_python() read back).
spawnpool::Result from_python(py::handle result) {
  spawnpool::Result r;
  r.returncode = field<int>(result, "returncode");
  r.failure = stage_of(result.attr("failure"));
  r.error_number = field<int>(result, "error_number");
  r.error_message = py::str(result.attr("error_message"));
  py::object out = result.attr("stdout"), err = result.attr("stderr");
  r.captured = !out.is_none() || !err.is_none();
  if (!out.is_none()) r.stdout_data = out.cast<std::string>();
  if (!err.is_none()) r.stderr_data = err.cast<std::string>();
  r.user_time = field<double>(result, "user_time");
  r.system_time = field<double>(result, "system_time");
  r.wall_time = field<double>(result, "wall_time");
  r.max_rss_kb = field<long>(result, "max_rss_kb");
  r.slot = field<int>(result, "slot");
  std::pair<const char*, std::int64_t*> numbers[] = {
      {"submitted_ns", &r.submitted_ns}, {"dispatched_ns", &r.dispatched_ns},
      {"received_ns", &r.received_ns}, {"launch_ns", &r.launch_ns},
      {"started_ns", &r.started_ns}, {"exited_ns", &r.exited_ns},
      {"completed_ns", &r.completed_ns}, {"slot_wait_ns", &r.slot_wait_ns},
      {"memory_wait_ns", &r.memory_wait_ns}, {"local_slot_wait_ns", &r.local_slot_wait_ns},
      {"jobserver_wait_ns", &r.jobserver_wait_ns}, {"peak_memory_bytes", &r.peak_memory_bytes},
      {"predicted_peak_bytes", &r.predicted_peak_bytes},
      {"predicted_in_use_bytes", &r.predicted_in_use_bytes},
      {"measured_in_use_bytes", &r.measured_in_use_bytes}};
  for (auto& [name, value] : numbers) *value = field<std::int64_t>(result, name);
  py::object source = result.attr("memory_source");
  if (!source.is_none()) {
    const std::string text = py::str(source);
    for (int i = 1; i <= 3; ++i)
      if (text == PyUnicode_AsUTF8(g_names.source_names[i]))
        r.memory_source = static_cast<spawnpool::MemorySource>(i);
  }
  r.oom_killed = field<bool>(result, "oom_killed");
  r.oom_retries = field<int>(result, "oom_retries");
  return r;
}

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

std::unique_ptr<spawnpool::detail::Layer> bottom_layer(py::handle base) {
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

void block_to_python(std::string_view out, std::string_view err) {
  py::gil_scoped_acquire acquire;
  try {
    py::reinterpret_borrow<py::object>(g_console_block)(py_bytes(out), py_bytes(err));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("spawnpool: a command's output block");
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

// One build's stack (session.h) for stack.py: run() through every layer, run_checks()
// below the launcher. The command is read with the GIL held (to_command), then the
// layers run without it.
class PySession {
 public:
  PySession(py::handle base, py::handle launcher, py::handle compilers, bool direct_exec,
            std::string prefix) {
    spawnpool::detail::SessionOptions options;
    options.direct_exec = direct_exec;
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

 private:
  std::unique_ptr<spawnpool::detail::Layer> base_;  // declared first: destroyed last
  std::unique_ptr<spawnpool::detail::Session> session_;
};

void bind_stack(py::module_& m) {
  using spawnpool::detail::Launcher;
  py::class_<PySession>(m, "Session")
      .def(py::init<py::handle, py::handle, py::handle, bool, std::string>(), py::arg("base"),
           py::arg("launcher") = py::none(), py::arg("compilers") = py::none(),
           py::arg("direct_exec") = true, py::arg("prefix") = "spawnpool")
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
      .def_property_readonly("direct_exec", &PySession::direct_exec);

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

// The build's history, progress and status printer (issue 18; spawnpool/status.py).
void bind_progress(py::module_& m) {
  using spawnpool::detail::BuildProgress;
  using spawnpool::detail::HistoryStore;
  using spawnpool::detail::StatusPrinter;
  using spawnpool::detail::StatusView;
  py::class_<HistoryStore, std::shared_ptr<HistoryStore>>(m, "History")
      .def(py::init([](py::handle path, std::string warning_prefix) {
             const std::string file = fs_bytes(path);
             auto warn = warnings_to_stderr(std::move(warning_prefix));
             py::gil_scoped_release release;  // opening reads the whole file
             return std::make_shared<HistoryStore>(file, spawnpool::detail::HistoryStoreOptions{},
                                                   std::move(warn));
           }),
           py::arg("path"), py::arg("warning_prefix") = "spawnpool: warning: ")
      .def("flush", &HistoryStore::flush, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("recording", &HistoryStore::recording);

  py::class_<BuildProgress, std::shared_ptr<BuildProgress>>(m, "BuildProgress")
      .def(py::init([](py::handle history, std::uint64_t targets_key) {
             std::shared_ptr<HistoryStore> store;
             if (!history.is_none()) store = history.cast<std::shared_ptr<HistoryStore>>();
             return std::make_shared<BuildProgress>(std::move(store), targets_key,
                                                    spawnpool::detail::monotonic_ns());
           }),
           py::arg("history") = py::none(), py::arg("targets_key") = 0)
      .def("begin", [](BuildProgress& progress, std::uint64_t targets_key) {
             progress.begin(targets_key, spawnpool::detail::monotonic_ns());
           }, py::arg("targets_key"))
      .def("set_expected_remaining", &BuildProgress::set_expected_remaining, py::arg("commands"))
      .def("set_units_built", &BuildProgress::set_units_built, py::arg("units"))
      .def("last_build", &BuildProgress::last_build,
           "(commands, units) of the last build of these targets; (0, 0): none known")
      .def("view", [](const BuildProgress& progress) {
             const StatusView v = progress.view(spawnpool::detail::monotonic_ns());
             py::dict d;
             d["done"] = v.done;
             d["total"] = v.total;
             d["elapsed_s"] = v.elapsed_s;
             d["remaining_s"] = v.remaining_s ? py::object(py::float_(*v.remaining_s)) : py::none();
             d["running"] = v.running;
             d["waiting_for_memory"] = v.waiting_for_memory;
             d["waiting_for_token"] = v.waiting_for_token;
             d["longest_running"] = v.longest_running;
             d["failed"] = progress.failed();
             return d;
           })
      .def("text", [](const BuildProgress& progress, std::size_t width, bool unicode) {
             return spawnpool::detail::format_status(
                 progress.view(spawnpool::detail::monotonic_ns()), width, unicode);
           }, py::arg("width") = 0, py::arg("unicode") = false);

  py::class_<StatusPrinter, std::shared_ptr<StatusPrinter>>(m, "StatusPrinter")
      .def(py::init([](std::shared_ptr<BuildProgress> progress, int fd, const std::string& mode,
                       bool unicode, bool terminal_reflows) {
             spawnpool::detail::StatusPrinterOptions options;
             options.fd = fd;
             if (mode == "line") options.mode = spawnpool::detail::StatusMode::kLine;
             else if (mode == "plain") options.mode = spawnpool::detail::StatusMode::kPlain;
             else throw py::value_error("status mode must be 'line' or 'plain', not '" + mode + "'");
             options.unicode = unicode;
             options.terminal_reflows = terminal_reflows;
             return std::make_shared<StatusPrinter>(std::move(progress), options);
           }),
           py::arg("progress"), py::arg("fd") = 1, py::arg("mode") = "line",
           py::arg("unicode") = false, py::arg("terminal_reflows") = true)
      .def("write", [](StatusPrinter& printer, int fd, py::bytes data) {
             std::string_view view = data;  // the bytes object outlives the call
             py::gil_scoped_release release;
             printer.write(fd, view);
           }, py::arg("fd"), py::arg("data"))
      .def("finish", [](StatusPrinter& printer, bool interrupted) {
             printer.finish(spawnpool::detail::monotonic_ns(), interrupted);
           }, py::arg("interrupted") = false, py::call_guard<py::gil_scoped_release>());

  m.def("hash_targets", &spawnpool::detail::hash_targets, py::arg("top_dir"), py::arg("targets"),
        "The history's key of a build's targets (in any order) under its top directory.");
}

}  // namespace

PYBIND11_MODULE(_spawnpool, m) {
  m.doc() = "Pre-spawned spawner processes fed over shared memory (see the spawnpool package).";
  g_main_thread = PyThread_get_thread_ident();
  make_names();
  g_empty_tuple = PyTuple_New(0);

  m.def(
      "_bind",
      [](py::handle result_type, py::handle command_type, py::handle console_message,
         py::handle output_block) {
        const std::pair<PyObject**, py::handle> given[] = {
            {&g_result_type, result_type}, {&g_command_type, command_type},
            {&g_console_message, console_message}, {&g_console_block, output_block}};
        for (const auto& [slot, value] : given) {
          if (value.is_none()) continue;
          Py_INCREF(value.ptr());
          Py_XDECREF(*slot);
          *slot = value.ptr();
        }
        // The engine's layers print through the package while it owns the console.
        if (g_console_message && g_console_block)
          spawnpool::detail::console::set_writer({message_to_python, block_to_python});
      },
      py::arg("result_type"), py::arg("command_type") = py::none(),
      py::arg("console_message") = py::none(), py::arg("output_block") = py::none(),
      "Tell the module the package's Result and Command types (command.py's) and its "
      "console (output_sync.py's console_message and output_block).");

  m.def(
      "write_build_report",
      [](py::handle trace_path, py::handle report_path) {
        const std::string trace = fs_bytes(trace_path), report = fs_bytes(report_path);
        py::gil_scoped_release release;
        return spawnpool::detail::write_build_report(trace, report);
      },
      py::arg("trace_path"), py::arg("report_path"),
      "Write the HTML build report of a Chrome trace (report.py); '' or what failed.");

  // make's jobserver (spawnpool/jobserver.h): opened once, early, shared by the pools.
  py::class_<spawnpool::Jobserver, std::shared_ptr<spawnpool::Jobserver>>(m, "Jobserver")
      .def_static("from_makeflags", &spawnpool::Jobserver::from_makeflags, py::arg("makeflags"),
                  "The client for the jobserver MAKEFLAGS names, or None.")
      .def_property_readonly("usable", &spawnpool::Jobserver::usable)
      .def_property_readonly("problem", [](const spawnpool::Jobserver& j) {
        return j.problem().empty() ? py::object(py::none()) : py::object(py::str(j.problem()));
      })
      .def_property_readonly("hint", [](const spawnpool::Jobserver& j) {
        return j.hint().empty() ? py::object(py::none()) : py::object(py::str(j.hint()));
      })
      .def_property_readonly("tokens_held", &spawnpool::Jobserver::tokens_held)
      .def_property_readonly("max_running", &spawnpool::Jobserver::max_running)
      .def("claim_warning", &spawnpool::Jobserver::claim_warning)
      .def("keep_from_commands", &spawnpool::Jobserver::keep_from_commands)
      .def("return_all", &spawnpool::Jobserver::return_all);

  bind_progress(m);
  bind_stack(m);

  py::class_<PyPool>(m, "Pool")
      .def(py::init<std::size_t, std::string, std::size_t, bool, py::handle, py::handle,
                    py::handle, std::string, std::shared_ptr<spawnpool::Jobserver>,
                    std::size_t, int, py::handle>(),
           py::arg("slots"), py::arg("spawner"), py::arg("output_chunk_bytes") = std::size_t{1} << 20,
           py::arg("same_cpu_handoff") = true, py::arg("memory_budget") = py::none(),
           py::arg("history") = py::none(), py::arg("cgroup_parent") = py::none(),
           py::arg("warning_prefix") = "spawnpool: warning: ",
           py::arg("jobserver") = py::none(), py::arg("local_slots") = 0,
           py::arg("stop_signal_fd") = -1, py::arg("progress") = py::none())
      .def("run", &PyPool::run, py::arg("command"))
      .def("cancel", &PyPool::cancel, py::arg("sig") = SIGTERM)
      .def("interrupt", &PyPool::interrupt, py::arg("sig") = SIGINT)
      .def("close", &PyPool::close)
      .def_property_readonly("slots", &PyPool::slots)
      .def_property_readonly("spawner_pids", &PyPool::spawner_pids);
}
