// _spawnpool: the compiled half of the `spawnpool` Python package, put together here:
// Pool (pool_binding.h: run(command) reads a spawnpool.Command and returns a
// spawnpool.Result; a command that never started is a Result carrying its failure, never
// an exception), Session and the engine's launcher and shell functions
// (stack_binding.h: one build's C++ stack of layers on a Pool or on a Python runner), the
// build's history, progress and status printer, the jobserver client and the report.
// Values cross in conversions.h. Arguments are turned into C++ values with the GIL held;
// every wait then runs with the GIL released. On the main thread the wait wakes every
// 100 ms to let Python run its signal handlers. The pool's warnings (its memory history,
// missing cgroups) are written to stderr by the engine itself, with the caller's prefix:
// they may come from the history's writer thread, which must not call into Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "engine/python/conversions.h"
#include "engine/python/pool_binding.h"
#include "engine/python/stack_binding.h"
#include "engine/python/statistics_binding.h"
#include "engine/src/history/history_store.h"
#include "engine/src/history/history_store_key.h"
#include "engine/src/progress/build_progress.h"
#include "engine/src/progress/status_mode.h"
#include "engine/src/progress/status_printer.h"
#include "engine/src/report/build_report.h"
#include "spawnpool/jobserver.h"
#include "spawnpool/pool.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace py = pybind11;
using namespace spawnpool::python;

namespace {

// The build's history, progress and status printer (issue 18; spawnpool/status.py).
void bind_progress(py::module_& m) {
  using spawnpool::detail::BuildProgress;
  using spawnpool::detail::HistoryStore;
  using spawnpool::detail::StatusMode;
  using spawnpool::detail::StatusPrinter;
  using spawnpool::detail::StatusView;
  using spawnpool::detail::TerminalConventions;
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
      .def("expect_outputs", [](BuildProgress& progress, const std::vector<std::string>& paths) {
             // The files' keys as the pool names a command's output (CommandKey::output).
             std::vector<std::uint64_t> keys;
             keys.reserve(paths.size());
             for (const std::string& path : paths) keys.push_back(spawnpool::detail::hash_output_path(path));
             progress.expect_outputs(keys);
           }, py::arg("paths"),
           "Absolute paths of files the commands still to come will write (the driver's "
           "targets known out of date): the history's durations of the commands that wrote "
           "them last predict those commands.")
      .def("set_units_built", &BuildProgress::set_units_built, py::arg("units"))
      .def("record", [](BuildProgress& progress, const std::string& path) {
             return progress.record_to(path);
           }, py::arg("path"),
           "Record what feeds the progress to the file `path` for an offline replay of the ETA "
           "(engine/src/progress/progress_recording.h); False: it cannot be written")
      .def("end_recording", [](BuildProgress& progress) {
             progress.end_recording(spawnpool::detail::monotonic_ns());
           })
      .def("last_build", &BuildProgress::last_build,
           "(commands, units) of the last build of these targets; (0, 0): none known")
      .def("set_unit_kinds", &BuildProgress::set_unit_kinds, py::arg("kinds"),
           "The driver's account of its units by kind, kept with the build's shape as given")
      .def("last_build_kinds", &BuildProgress::last_build_kinds,
           "The last build's account of its units by kind, as its driver gave it; '': none")
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

  // The terminal's conventions (the locale, xterm) come from the environment unless given.
  py::class_<StatusPrinter, std::shared_ptr<StatusPrinter>>(m, "StatusPrinter")
      .def(py::init([](std::shared_ptr<BuildProgress> progress, int fd, const std::string& mode,
                       std::optional<bool> unicode, std::optional<bool> terminal_reflows) {
             StatusMode status_mode;
             if (mode == "line") status_mode = StatusMode::kLine;
             else if (mode == "plain") status_mode = StatusMode::kPlain;
             else throw py::value_error("status mode must be 'line' or 'plain', not '" + mode + "'");
             TerminalConventions conventions = TerminalConventions::from_environment();
             if (unicode) conventions.utf8 = *unicode;
             if (terminal_reflows) conventions.reflows = *terminal_reflows;
             return std::make_shared<StatusPrinter>(
                 std::move(progress),
                 spawnpool::detail::status_printer_options(status_mode, fd, conventions));
           }),
           py::arg("progress"), py::arg("fd") = 1, py::arg("mode") = "line",
           py::arg("unicode") = py::none(), py::arg("terminal_reflows") = py::none())
      .def("write", [](StatusPrinter& printer, int fd, py::buffer data) {
             // Any bytes-like object (a command's block comes as a memoryview); it and
             // the buffer it lends outlive the call.
             const py::buffer_info info = data.request();
             const std::string_view view(static_cast<const char*>(info.ptr),
                                         static_cast<std::size_t>(info.size * info.itemsize));
             py::gil_scoped_release release;
             printer.write(fd, view);
           }, py::arg("fd"), py::arg("data"))
      .def("finish", [](StatusPrinter& printer, bool interrupted) {
             printer.finish(spawnpool::detail::monotonic_ns(), interrupted);
           }, py::arg("interrupted") = false, py::call_guard<py::gil_scoped_release>());

  m.def("status_mode", [](const std::string& setting, int fd, std::string term,
                          bool clicolor_force) -> py::object {
          TerminalConventions conventions;
          conventions.term = std::move(term);
          conventions.clicolor_force = clicolor_force;
          const std::optional<StatusMode> mode =
              spawnpool::detail::status_mode(setting, fd, conventions);
          if (!mode) return py::none();
          return py::str(*mode == StatusMode::kLine ? "line" : "plain");
        }, py::arg("setting"), py::arg("fd"), py::arg("term"), py::arg("clicolor_force"),
        "'line', 'plain' or None (off): what a build gets on fd (progress/status_mode.h).");
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
        bind_console();  // the engine's layers print through the package from now on
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
  bind_statistics(m);

  py::class_<PyPool>(m, "Pool")
      .def(py::init<std::size_t, std::string, std::size_t, bool, py::handle, py::handle,
                    py::handle, std::string, std::shared_ptr<spawnpool::Jobserver>,
                    std::size_t, int, py::handle>(),
           py::arg("slots"), py::arg("spawner"), py::arg("output_chunk_bytes") = std::size_t{1} << 20,
           py::arg("same_cpu_handoff") = false, py::arg("memory_budget") = py::none(),
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
