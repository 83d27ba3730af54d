#include "engine/python/statistics_binding.h"

#include <pybind11/stl.h>

#include <string>

#include "engine/python/conversions.h"
#include "engine/src/stack/build_statistics.h"

namespace py = pybind11;

namespace spawnpool::python {

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
             self.add(from_python(result), line);
           })
      .def("totals", &BuildStatistics::totals)
      .def("report", &BuildStatistics::report, py::arg("prefix") = "spawnpool")
      .def("prediction_error", &BuildStatistics::prediction_error)
      .def("longest", &BuildStatistics::longest);
}

}  // namespace spawnpool::python
