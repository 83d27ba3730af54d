// The engine's build recording for the package: _spawnpool.BuildStatistics
// (engine/src/stack/build_statistics.h; stats.py's Stats) and _spawnpool.TraceWriter
// (engine/src/stack/trace_writer.h; trace.py's TraceWriter), fed spawnpool.Result objects
// when used alone and shared with a Session (stack_binding.cc), whose layers record
// without the GIL. Thread-safe as the engine's statistics and trace.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "engine/src/stack/build_statistics.h"
#include "engine/src/stack/trace_layer.h"
#include "engine/src/stack/trace_writer.h"

namespace spawnpool::python {

/// Adds BuildStatistics and TraceWriter to the module.
void bind_statistics(pybind11::module_& m);

/// The engine's object behind a _spawnpool.BuildStatistics (null for None).
std::shared_ptr<detail::BuildStatistics> statistics_of(pybind11::handle statistics);

/// The trace layer's hook for `command_args` (a callable returning a dict of more args
/// for the command just run, or None; None: no hook): it takes the GIL only when called,
/// and an exception in it, or an arg JSON cannot hold, costs that command its extra args
/// only (the trace never fails the build). Made with the GIL held.
detail::TraceArgs trace_args_hook(pybind11::object command_args);

}  // namespace spawnpool::python
