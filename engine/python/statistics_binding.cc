#include "engine/python/statistics_binding.h"

#include <pybind11/stl.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "engine/python/conversions.h"
#include "engine/src/stack/build_statistics.h"

namespace py = pybind11;

namespace spawnpool::python {
namespace {

// The fields the statistics read, and only those: the full conversion (from_python) reads
// some thirty and copies the captured output, which cost the driver about 20k
// instructions a command under output sync (bench_projects/driver_instructions.py).
// Names interned once; called with the GIL.
Result statistics_fields(py::handle result) {
  static const struct Names {
    py::str failure{"failure"}, returncode{"returncode"}, submitted{"submitted_ns"},
        dispatched{"dispatched_ns"}, launch{"launch_ns"}, started{"started_ns"},
        exited{"exited_ns"}, completed{"completed_ns"}, predicted{"predicted_peak_bytes"},
        peak{"peak_memory_bytes"}, memory_wait{"memory_wait_ns"},
        source{"memory_source"}, oom_retries{"oom_retries"}, oom_killed{"oom_killed"};
  }* names = new Names();  // never freed: the interpreter may be gone at exit
  auto number = [&](const py::str& name) {
    return py::getattr(result, name).cast<std::int64_t>();
  };
  Result r;
  py::object failure = py::getattr(result, names->failure);
  if (!failure.is_none()) {
    // Only whether it started counts here (BuildStatistics::add); which stage does not.
    r.failure = FailureStage::kExec;
    r.completed_ns = number(names->completed);
    return r;
  }
  r.returncode = static_cast<int>(number(names->returncode));
  r.submitted_ns = number(names->submitted);
  r.dispatched_ns = number(names->dispatched);
  r.launch_ns = number(names->launch);
  r.started_ns = number(names->started);
  r.exited_ns = number(names->exited);
  r.completed_ns = number(names->completed);
  r.predicted_peak_bytes = number(names->predicted);
  if (r.predicted_peak_bytes) {
    r.peak_memory_bytes = number(names->peak);
    r.memory_wait_ns = number(names->memory_wait);
    r.oom_retries = static_cast<int>(number(names->oom_retries));
    r.oom_killed = py::getattr(result, names->oom_killed).cast<bool>();
    py::object source = py::getattr(result, names->source);
    if (!source.is_none()) {
      const std::string text = py::str(source);
      if (text == "cgroup") r.memory_source = MemorySource::kCgroup;
      else if (text == "cgroup_sampled") r.memory_source = MemorySource::kCgroupSampled;
      else if (text == "rusage") r.memory_source = MemorySource::kRusage;
    }
  }
  return r;
}

// `command_args()` as the members of a JSON object ("" for none, or when it fails).
// Called with the GIL.
std::string extra_args(py::handle command_args) {
  static py::object* const encode = new py::object(  // never freed, as above
      py::module_::import("json").attr("JSONEncoder")(
          py::arg("separators") = py::make_tuple(",", ":")).attr("encode"));
  try {
    py::object value = command_args();
    if (value.is_none()) return {};
    const std::string text = (*encode)(py::dict(value)).cast<std::string>();  // {...}
    return text.size() > 2 ? text.substr(1, text.size() - 2) : std::string();
  } catch (py::error_already_set&) {  // the trace must never fail the build
    return {};
  }
}

std::shared_ptr<detail::TraceWriter> open_trace(py::handle path, const std::string& process_name,
                                                const std::string& command_line) {
  const std::string file = fs_bytes(path);
  try {
    return std::make_shared<detail::TraceWriter>(file, process_name, command_line);
  } catch (const std::system_error& e) {  // as os.open would: OSError with errno and name
    errno = e.code().value();
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path.ptr());
    throw py::error_already_set();
  }
}

}  // namespace

std::shared_ptr<detail::BuildStatistics> statistics_of(py::handle statistics) {
  if (statistics.is_none()) return nullptr;
  return statistics.cast<std::shared_ptr<detail::BuildStatistics>>();
}

detail::TraceArgs trace_args_hook(py::object command_args) {
  if (command_args.is_none()) return {};
  // Shared by the hook's copies; let go with the GIL, wherever the last copy goes.
  std::shared_ptr<py::object> callable(new py::object(std::move(command_args)),
                                       [](py::object* object) {
                                         py::gil_scoped_acquire acquire;
                                         delete object;
                                       });
  return [callable] {
    py::gil_scoped_acquire acquire;
    return extra_args(*callable);
  };
}

void bind_statistics(py::module_& m) {
  using detail::BuildStatistics;
  using detail::StatisticsTotals;
  py::class_<StatisticsTotals>(m, "StatisticsTotals")
      .def_readonly("slots", &StatisticsTotals::slots)
      .def_readonly("commands", &StatisticsTotals::commands)
      .def_readonly("failed", &StatisticsTotals::failed)
      .def_readonly("unstarted", &StatisticsTotals::unstarted)
      .def_readonly("command_ns", &StatisticsTotals::command_ns)
      .def_readonly("overhead_ns", &StatisticsTotals::overhead_ns)
      .def_readonly("queue_ns", &StatisticsTotals::queue_ns)
      .def_readonly("build_wall", &StatisticsTotals::build_wall_s)
      .def_readonly("utilization", &StatisticsTotals::utilization);
  py::class_<BuildStatistics, std::shared_ptr<BuildStatistics>>(m, "BuildStatistics")
      .def(py::init<int>(), py::arg("slots") = 0)
      .def("note_slots", &BuildStatistics::note_slots)
      .def("add",
           [](BuildStatistics& self, py::handle result, const std::string& line) {
             self.add(statistics_fields(result), line);
           })
      .def("totals", &BuildStatistics::totals)
      .def("report", &BuildStatistics::report, py::arg("prefix") = "spawnpool")
      .def("prediction_error", &BuildStatistics::prediction_error)
      .def("longest", &BuildStatistics::longest);

  using detail::TraceWriter;
  py::class_<TraceWriter, std::shared_ptr<TraceWriter>>(m, "TraceWriter")
      .def(py::init(&open_trace), py::arg("path"), py::arg("process_name") = "spawnpool",
           py::arg("command_line") = "")
      .def("add",
           [](TraceWriter& self, py::handle result, py::handle line, py::handle command_args) {
             const Result r = from_python(result);
             const std::string text = fs_bytes(line);
             const std::string extra =
                 r.started() && !command_args.is_none() ? extra_args(command_args) : "";
             py::gil_scoped_release release;  // a failed write's message takes it back
             self.add(r, text, extra);
           },
           py::arg("result"), py::arg("line"), py::arg("command_args") = py::none())
      .def("close", &TraceWriter::close)
      .def_property_readonly("origin_ns", &TraceWriter::origin_ns)
      .def_property_readonly("fd", &TraceWriter::fd);
}

}  // namespace spawnpool::python
