// The shared-memory segment of one pool, created through Boost.Interprocess with an
// unguessable name, O_EXCL and mode 0600. Spawners receive its descriptor at start, so
// the name is unlinked as soon as they are launched. Not thread-safe to construct or
// destroy; slot views may be used from any thread under the protocol's turn rules.
#pragma once

#include <boost/interprocess/mapped_region.hpp>
#include <cstdint>
#include <string>

#include "worker_pool/protocol/protocol.h"

namespace spawnpool::detail {

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
  const std::string& name() const { return name_; }
  const protocol::SegmentHeader& header() const { return header_; }
  protocol::SlotView slot(std::uint32_t index) const;
  /// Removes the name from /dev/shm; the mappings stay. Idempotent.
  void unlink_name();

 private:
  std::string name_;
  boost::interprocess::mapped_region region_;
  protocol::SegmentHeader header_{};
  std::uint64_t page_size_;
  int fd_ = -1;
  bool named_ = true;
};

}  // namespace spawnpool::detail
