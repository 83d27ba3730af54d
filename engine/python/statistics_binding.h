// The engine's build statistics for the package (stats.py's Stats):
// _spawnpool.BuildStatistics (engine/src/stack/build_statistics.h), fed spawnpool.Result
// objects. Thread-safe as the engine's statistics.
#pragma once

#include <pybind11/pybind11.h>

namespace spawnpool::python {

/// Adds BuildStatistics to the module.
void bind_statistics(pybind11::module_& m);

}  // namespace spawnpool::python
