// CLOCK_MONOTONIC in nanoseconds: one clock shared by the driver and every spawner, so
// timestamps taken in different processes can be subtracted. Thread-safe (vDSO call).
#pragma once

#include <time.h>

#include <cstdint>

namespace spawnpool::detail {

inline std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

}  // namespace spawnpool::detail
