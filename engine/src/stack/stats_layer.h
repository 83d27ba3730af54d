// The statistics layer: every result that comes up through it is added to the build's
// statistics (build_statistics.h) with the line that ran (recorded_line.h). It holds no lock of its own
// (the statistics do, only for the sums) and never fails a command.
#pragma once

#include "engine/src/stack/build_statistics.h"
#include "engine/src/stack/layer.h"
#include "engine/src/stack/recorded_line.h"

namespace spawnpool::detail {

class StatsLayer : public StackedLayer {
 public:
  /// `statistics` is not owned and must outlive the layer.
  StatsLayer(Layer& inner, BuildStatistics& statistics)
      : StackedLayer(inner), statistics_(statistics) {}

  Result run(PreparedCommand& command) override {
    const RecordedLine line(command);
    Result result = inner_.run(command);
    statistics_.add(result, line.text());
    return result;
  }

 private:
  BuildStatistics& statistics_;
};

}  // namespace spawnpool::detail
