#include "engine/python/statistics_binding.h"

#include <pybind11/stl.h>

#include <string>

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

}  // namespace

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
  py::class_<BuildStatistics>(m, "BuildStatistics")
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
}

}  // namespace spawnpool::python
