// The shared-memory segment of one pool: an anonymous memfd (memfd_create with
// MFD_CLOEXEC), sized once and sealed against resizing, mapped here and passed to each
// spawner as its fd 3. It has no name in any file system, so nothing a crash leaves
// behind can outlive the last process that maps it or holds its descriptor. Not
// thread-safe to construct or destroy; slot views may be used from any thread under the
// protocol's turn rules.
#pragma once

#include <cstdint>

#include "worker_pool/protocol/protocol.h"

namespace spawnpool::detail {

/// What /proc/<pid>/fd and /proc/<pid>/maps show for a segment: "/memfd:" + this, and
/// " (deleted)" after it (leak checks look for it).
inline constexpr const char* kSegmentMemfdName = "spawnpool-segment";

class Segment {
 public:
  /// Creates and maps the segment and writes its header. Throws std::system_error.
  Segment(std::uint32_t slot_count, std::uint64_t request_capacity,
          std::uint64_t output_capacity);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  /// Close-on-exec descriptor (>= 5) for spawners to inherit as protocol::kSegmentFd.
  int fd() const { return fd_; }
  const protocol::SegmentHeader& header() const { return header_; }
  protocol::SlotView slot(std::uint32_t index) const;

 private:
  protocol::SegmentHeader header_{};
  std::uint64_t page_size_;
  std::uint64_t size_ = 0;   // bytes mapped at base_
  void* base_ = nullptr;     // the mapping, for the segment's whole life
  int fd_ = -1;
};

}  // namespace spawnpool::detail
