// A fake spawnpool-spawner for protocol_corruption_test: it attaches to its slot like the
// real one (segment on fd 3, lifeline on fd 4, slot index in argv[1]) but answers every
// request with the malformed reply named by $SPAWNPOOL_TEST_LIE, to show that the driver
// distrusts what a spawner writes. Single-threaded; exits when the lifeline closes.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "worker_pool/protocol/futex.h"
#include "worker_pool/protocol/protocol.h"

namespace {

using namespace spawnpool;

bool driver_gone() {
  char byte;
  const ssize_t n = recv(protocol::kLifelineFd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void hand_over(protocol::SlotControl* control, std::uint32_t state) {
  control->state.store(state, std::memory_order_release);
  detail::futex_wake_all(control->state);
}

// Waits for the driver to hand the turn over; returns the state it wrote.
std::uint32_t wait_for_turn(protocol::SlotControl* control) {
  for (;;) {
    const std::uint32_t state = control->state.load(std::memory_order_acquire);
    if (state == protocol::kRequest || state == protocol::kNextChunk) return state;
    if (driver_gone()) _exit(0);
    detail::futex_wait(control->state, state, 100);
  }
}

// Fills `reply` with the lie for a request (`chunk` 0) or a kNextChunk (`chunk` > 0).
void lie(const std::string& kind, int chunk, std::uint64_t capacity,
         protocol::ReplyHeader& reply, char* output) {
  reply = protocol::ReplyHeader{};
  if (kind == "stage") {
    reply.failure_stage = 99;
  } else if (kind == "sequence") {
    reply.stdout_size = 10;
    reply.chunk_offset = 5;
    reply.chunk_size = 5;
  } else if (kind == "oversized-chunk") {
    reply.stdout_size = capacity * 4;
    reply.chunk_size = capacity + 1;
  } else if (kind == "huge") {
    // Announces ~2 TiB of output, sends one honest chunk, then breaks the sequence.
    reply.stdout_size = (std::uint64_t{1} << 40) - 1;
    reply.stderr_size = std::uint64_t{1} << 40;
    reply.chunk_offset = chunk == 0 ? 0 : capacity * 7;
    reply.chunk_size = capacity;
    std::memset(output, 'x', capacity);
  } else {  // "none": an honest empty reply, exit status 0
    reply.wait_status = 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* kind_env = std::getenv("SPAWNPOOL_TEST_LIE");
  const std::string kind = kind_env ? kind_env : "none";
  struct stat st;
  if (fstat(protocol::kSegmentFd, &st) != 0) return 3;
  void* base = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                    protocol::kSegmentFd, 0);
  if (base == MAP_FAILED) return 4;
  close(protocol::kSegmentFd);
  const std::uint64_t page_size = sysconf(_SC_PAGESIZE);
  const auto header = *static_cast<const protocol::SegmentHeader*>(base);
  if (!protocol::header_is_valid(header, st.st_size, page_size)) return 5;
  const auto index = static_cast<std::uint32_t>(std::strtoul(argv[1], nullptr, 10));
  if (index >= header.slot_count) return 6;
  const protocol::SlotView slot = protocol::slot_at(base, header, index, page_size);
  slot.control->spawner_pid.store(getpid());
  hand_over(slot.control, protocol::kIdle);
  for (int chunk = 0;;) {
    chunk = wait_for_turn(slot.control) == protocol::kRequest ? 0 : chunk + 1;
    lie(kind, chunk, header.output_capacity, *slot.reply, slot.output);
    hand_over(slot.control, protocol::kReply);
  }
}
