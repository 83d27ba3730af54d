#include "engine/src/spawners/segment.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdio>
#include <system_error>

namespace spawnpool::detail {
namespace bip = boost::interprocess;
namespace {

// 128 random bits: nobody can guess the name to race us for it.
std::string unguessable_name() {
  unsigned char bytes[16];
  for (std::size_t got = 0; got < sizeof bytes;) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "getrandom");
    if (n > 0) got += n;
  }
  std::string name = "spawnpool-";
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    name += hex;
  }
  return name;
}

bip::shared_memory_object create_exclusive(const std::string& name) {
  bip::permissions owner_only;
  owner_only.set_permissions(0600);
  try {
    return bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                     owner_only);
  } catch (const bip::interprocess_exception& e) {
    throw std::system_error(e.get_native_error(), std::generic_category(),
                            "creating shared memory /" + name);
  }
}

}  // namespace

Segment::Segment(std::uint32_t slot_count, std::uint64_t request_capacity,
                 std::uint64_t output_capacity)
    : name_(unguessable_name()), page_size_(sysconf(_SC_PAGESIZE)) {
  bip::shared_memory_object object = create_exclusive(name_);
  header_.magic = protocol::kMagic;
  header_.version = protocol::kVersion;
  header_.slot_count = slot_count;
  header_.request_capacity = request_capacity;
  header_.output_capacity = output_capacity;
  header_.slot_size = protocol::slot_size_for(request_capacity, output_capacity, page_size_);
  try {
    object.truncate(static_cast<bip::offset_t>(protocol::segment_size(header_, page_size_)));
    region_ = bip::mapped_region(object, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    unlink_name();
    throw std::system_error(e.get_native_error(), std::generic_category(),
                            "sizing shared memory /" + name_);
  }
  // Boost's descriptor is not close-on-exec, and any program the driver starts would
  // inherit it: keep a private one that is, placed above the descriptors a spawner is
  // given (so posix_spawn's dup2 cannot clobber it), and let Boost's close with `object`.
  // The mapping does not depend on either descriptor.
  fd_ = fcntl(object.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 5);
  if (fd_ < 0) {
    const int e = errno;
    unlink_name();
    throw std::system_error(e, std::generic_category(), "dup of the segment descriptor");
  }
  *static_cast<protocol::SegmentHeader*>(region_.get_address()) = header_;
}

Segment::~Segment() {
  unlink_name();
  if (fd_ >= 0) close(fd_);
}

protocol::SlotView Segment::slot(std::uint32_t index) const {
  return protocol::slot_at(region_.get_address(), header_, index, page_size_);
}

void Segment::unlink_name() {
  if (named_) bip::shared_memory_object::remove(name_.c_str());
  named_ = false;
}

}  // namespace spawnpool::detail
