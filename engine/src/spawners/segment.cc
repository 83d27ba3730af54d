#include "engine/src/spawners/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace spawnpool::detail {
namespace {

[[noreturn]] void fail(int error_number, const std::string& what) {
  throw std::system_error(error_number, std::generic_category(), what);
}

// Seals where the kernel has them (memfd sealing: Linux 3.17; some sandboxes refuse
// MFD_ALLOW_SEALING): a spawner, buggy or compromised, then cannot shrink the segment
// under the driver's mapping (a SIGBUS in the driver) nor grow it. Without seals the
// segment works the same; only that protection is missing.
int create_memfd() {
  const int fd = memfd_create(kSegmentMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd >= 0 || errno != EINVAL) return fd;
  return memfd_create(kSegmentMemfdName, MFD_CLOEXEC);
}

}  // namespace

Segment::Segment(std::uint32_t slot_count, std::uint64_t request_capacity,
                 std::uint64_t output_capacity)
    : page_size_(sysconf(_SC_PAGESIZE)) {
  header_.magic = protocol::kMagic;
  header_.version = protocol::kVersion;
  header_.slot_count = slot_count;
  header_.request_capacity = request_capacity;
  header_.output_capacity = output_capacity;
  header_.slot_size = protocol::slot_size_for(request_capacity, output_capacity, page_size_);
  size_ = protocol::segment_size(header_, page_size_);

  const int created = create_memfd();
  if (created < 0) fail(errno, "memfd_create for the shared-memory segment");
  // Above the descriptors a spawner is given, so posix_spawn's dup2 cannot clobber it.
  fd_ = fcntl(created, F_DUPFD_CLOEXEC, 5);
  const int dup_error = errno;
  close(created);
  if (fd_ < 0) fail(dup_error, "dup of the segment descriptor");
  if (ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    const int e = errno;
    close(fd_);
    fail(e, "sizing the shared-memory segment");
  }
  // EINVAL/EPERM where sealing is unavailable: see create_memfd().
  (void)fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    const int e = errno;
    close(fd_);
    fail(e, "mapping the shared-memory segment");
  }
  *static_cast<protocol::SegmentHeader*>(base_) = header_;
}

Segment::~Segment() {
  munmap(base_, size_);
  close(fd_);
}

protocol::SlotView Segment::slot(std::uint32_t index) const {
  return protocol::slot_at(base_, header_, index, page_size_);
}

}  // namespace spawnpool::detail
