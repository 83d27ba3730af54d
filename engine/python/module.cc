// _spawnpool: the compiled half of the `spawnpool` Python package. Arguments are turned
// into C++ values with the GIL held; every wait then runs with the GIL released. On the
// main thread the wait wakes every 100 ms to let Python run its signal handlers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "spawnpool/pool.h"

namespace py = pybind11;

namespace {

PyObject* g_spawn_error = nullptr;
PyObject* g_spawner_died = nullptr;
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

/// What Python sees of a result: output converted to bytes once.
struct PyResult {
  int returncode;
  py::object stdout_bytes, stderr_bytes;
  double user_time, system_time, wall_time;
  long max_rss_kb;
  int slot;
  std::int64_t submitted_ns, dispatched_ns, received_ns, launch_ns, started_ns, exited_ns,
      completed_ns;
};

[[noreturn]] void raise_spawn_error(const spawnpool::Result& r, const std::string& program,
                                    const std::string& cwd) {
  const bool died = r.failure == spawnpool::FailureStage::kSpawnerDied;
  PyObject* type = died ? g_spawner_died : g_spawn_error;
  py::object filename = py::none();
  if (r.failure == spawnpool::FailureStage::kExec) filename = py::str(program);
  if (r.failure == spawnpool::FailureStage::kChdir) filename = py::str(cwd);
  py::object error = py::reinterpret_borrow<py::object>(type)(r.error_number, r.error_message,
                                                              filename);
  // Python keeps the one name "spawner" for the engine's own stages until the runner seam
  // (issue 13) moves the package and its tests to "spawner_died" / "pool_closed".
  const bool engine_stage = died || r.failure == spawnpool::FailureStage::kPoolClosed;
  error.attr("stage") = engine_stage ? "spawner" : spawnpool::stage_name(r.failure);
  PyErr_SetObject(type, error.ptr());
  throw py::error_already_set();
}

class PyPool {
 public:
  PyPool(std::size_t slots, std::string spawner, std::size_t output_chunk_bytes,
         bool same_cpu_handoff) {
    spawnpool::PoolOptions options;
    options.slots = slots;
    options.spawner_path = std::move(spawner);
    options.output_chunk_bytes = output_chunk_bytes;
    options.same_cpu_handoff = same_cpu_handoff;
    pool_ = std::make_shared<spawnpool::Pool>(options);
    slots_ = pool_->slots();
  }

  PyResult run(py::handle argv, py::handle env, py::handle cwd, bool capture, bool merge_stderr) {
    spawnpool::Command command;
    command.argv = to_argv(argv);
    if (!env.is_none()) command.env = to_env(env);
    if (!cwd.is_none()) command.cwd = fs_bytes(cwd);
    command.output = !capture ? spawnpool::OutputMode::kPassthrough
                     : merge_stderr ? spawnpool::OutputMode::kCaptureMerged
                                    : spawnpool::OutputMode::kCapture;
    // Our own reference: close() from another thread must not pull the pool away.
    const std::shared_ptr<spawnpool::Pool> pool = checked_pool();
    std::optional<py::error_already_set> raised;
    spawnpool::Result r;
    // The GIL is released and taken back by hand, not by gil_scoped_release: at
    // interpreter exit a daemon thread taking the GIL back is ended by pthread_exit,
    // whose unwinding must not cross a noexcept destructor (std::terminate).
    PyThreadState* saved = PyEval_SaveThread();
    try {
      spawnpool::Job job = pool->submit(command);
      r = pool->wait(job, on_main_thread() ? tick_for(raised) : spawnpool::WaitTick{});
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    if (raised) throw std::move(*raised);
    if (!r.started())  // argv may be empty: the engine refused it (EINVAL)
      raise_spawn_error(r, command.argv.empty() ? std::string() : command.argv[0], command.cwd);
    return to_python(std::move(r), command.output);
  }

  void cancel(int sig) {
    if (pool_) pool_->cancel_all(sig);
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
  std::vector<int> spawner_pids() { return pool_ ? pool_->spawner_pids() : std::vector<int>{}; }

 private:
  std::shared_ptr<spawnpool::Pool> checked_pool() {
    if (!pool_) {
      spawnpool::Result closed;
      closed.failure = spawnpool::FailureStage::kPoolClosed;
      closed.error_number = ESHUTDOWN;
      closed.error_message = "the pool is closed";
      raise_spawn_error(closed, "", "");
    }
    return pool_;
  }

  static bool on_main_thread() { return PyThread_get_thread_ident() == g_main_thread; }

  // Runs Python's pending signal handlers. A handler that raises (KeyboardInterrupt)
  // interrupts the command with SIGINT; the exception is re-raised once it has ended.
  static spawnpool::WaitTick tick_for(std::optional<py::error_already_set>& raised) {
    return [&raised]() -> int {
      py::gil_scoped_acquire acquire;
      if (raised || PyErr_CheckSignals() == 0) return 0;
      raised.emplace();
      return SIGINT;
    };
  }

  static PyResult to_python(spawnpool::Result r, spawnpool::OutputMode output) {
    PyResult out{r.returncode, py::none(), py::none(), r.user_time, r.system_time, r.wall_time,
                 r.max_rss_kb, r.slot, r.submitted_ns, r.dispatched_ns, r.received_ns,
                 r.launch_ns, r.started_ns, r.exited_ns, r.completed_ns};
    if (r.captured) out.stdout_bytes = py::bytes(r.stdout_data);
    if (output == spawnpool::OutputMode::kCapture) out.stderr_bytes = py::bytes(r.stderr_data);
    return out;
  }

  std::shared_ptr<spawnpool::Pool> pool_;  // null once closed
  std::size_t slots_ = 0;
};

}  // namespace

PYBIND11_MODULE(_spawnpool, m) {
  m.doc() = "Pre-spawned spawner processes fed over shared memory (see the spawnpool package).";
  g_main_thread = PyThread_get_thread_ident();

  static py::exception<void> spawn_error(m, "SpawnError", PyExc_OSError);
  static py::exception<void> spawner_died(m, "SpawnerDied", spawn_error.ptr());
  g_spawn_error = spawn_error.ptr();
  g_spawner_died = spawner_died.ptr();

  py::class_<PyResult>(m, "Result")
      .def_readonly("returncode", &PyResult::returncode)
      .def_readonly("stdout", &PyResult::stdout_bytes)
      .def_readonly("stderr", &PyResult::stderr_bytes)
      .def_readonly("user_time", &PyResult::user_time)
      .def_readonly("system_time", &PyResult::system_time)
      .def_readonly("wall_time", &PyResult::wall_time)
      .def_readonly("max_rss_kb", &PyResult::max_rss_kb)
      .def_readonly("slot", &PyResult::slot)
      .def_readonly("submitted_ns", &PyResult::submitted_ns)
      .def_readonly("dispatched_ns", &PyResult::dispatched_ns)
      .def_readonly("received_ns", &PyResult::received_ns)
      .def_readonly("launch_ns", &PyResult::launch_ns)
      .def_readonly("started_ns", &PyResult::started_ns)
      .def_readonly("exited_ns", &PyResult::exited_ns)
      .def_readonly("completed_ns", &PyResult::completed_ns)
      .def("__repr__", [](const PyResult& r) {
        return "<spawnpool.Result returncode=" + std::to_string(r.returncode) + ">";
      });

  py::class_<PyPool>(m, "Pool")
      .def(py::init<std::size_t, std::string, std::size_t, bool>(), py::arg("slots"),
           py::arg("spawner"), py::arg("output_chunk_bytes") = std::size_t{1} << 20,
           py::arg("same_cpu_handoff") = true)
      .def("run", &PyPool::run, py::arg("argv"), py::arg("env") = py::none(),
           py::arg("cwd") = py::none(), py::arg("capture") = false,
           py::arg("merge_stderr") = false)
      .def("cancel", &PyPool::cancel, py::arg("sig") = SIGTERM)
      .def("close", &PyPool::close)
      .def_property_readonly("slots", &PyPool::slots)
      .def_property_readonly("spawner_pids", &PyPool::spawner_pids);
}
