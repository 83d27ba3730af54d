#include "engine/python/conversions.h"

#include <pybind11/stl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

#include "spawnpool/failure_stage.h"

namespace spawnpool::python {

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
static Names g_names;

static PyObject* intern(const char* name) { return PyUnicode_InternFromString(name); }

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

static py::object attribute(py::handle object, PyObject* name) {
  PyObject* value = PyObject_GetAttr(object.ptr(), name);
  if (!value) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

static spawnpool::OutputMode to_output_mode(py::handle mode) {
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

static void set_field(PyObject* fields, PyObject* name, PyObject* value) {
  if (!value || PyDict_SetItem(fields, name, value) != 0) {
    Py_XDECREF(value);
    throw py::error_already_set();
  }
  Py_DECREF(value);
}

// The memory fields: the peak and its source always (from ru_maxrss without a budget),
// the admission's only where set, so that a pool without a budget pays two fields.
static void set_memory_fields(PyObject* d, const spawnpool::Result& r) {
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

static const char* output_mode_name(spawnpool::OutputMode mode) {
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

static spawnpool::FailureStage stage_of(py::handle name) {
  if (name.is_none()) return spawnpool::FailureStage::kNone;
  const std::string text = py::str(name);
  for (int i = 1; i <= static_cast<int>(spawnpool::FailureStage::kPoolClosed); ++i) {
    const auto stage = static_cast<spawnpool::FailureStage>(i);
    if (text == spawnpool::stage_name(stage)) return stage;
  }
  return spawnpool::FailureStage::kSpawner;
}

template <typename T>
static T field(py::handle result, const char* name) {
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


}  // namespace spawnpool::python
