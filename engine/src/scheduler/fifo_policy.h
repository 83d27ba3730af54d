// The default scheduling policy: a job starts as soon as a slot is free, in submission
// order (the Scheduler keeps the order and hands out the last-freed slot). Stateless: the
// Scheduler's lock covers its calls like any policy's.
#pragma once

#include "engine/src/scheduler/scheduling_policy.h"

namespace spawnpool::detail {

class FifoPolicy final : public SchedulingPolicy {
 public:
  Admission admit(JobInfo&, std::int64_t) override { return Admission::kStart; }
};

}  // namespace spawnpool::detail
