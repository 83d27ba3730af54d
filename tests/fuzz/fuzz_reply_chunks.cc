// libFuzzer target: the driver's checking and placing of reply chunks a spawner wrote,
// replayed as SlotChannel::collect() does it: chunk after chunk until the announced output
// has arrived or a chunk is refused. Input layout: 4 bytes giving the chunk capacity,
// then records of a protocol::ReplyHeader (120 bytes) followed by one chunk's bytes.
// The output area is a heap buffer of exactly the capacity, so an overread is caught.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "worker_pool/protocol/reply_codec.h"

namespace {

using spawnpool::protocol::ReplyHeader;

// What the driver may allocate up front on a spawner's say-so.
constexpr std::uint64_t kReserveBound = std::uint64_t{64} << 20;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_reply_chunks: invariant broken: %s\n", what);
    std::abort();
  }
}

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), left_(size) {}
  bool take(void* out, std::size_t n) {
    if (left_ < n) return false;
    std::memcpy(out, data_, n);
    data_ += n;
    left_ -= n;
    return true;
  }
  // Fills `out` with up to `n` bytes, zeroes for the rest.
  void take_padded(char* out, std::size_t n) {
    const std::size_t got = std::min(n, left_);
    std::memcpy(out, data_, got);
    std::memset(out + got, 0, n - got);
    data_ += got;
    left_ -= got;
  }

 private:
  const std::uint8_t* data_;
  std::size_t left_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input input(data, size);
  std::uint32_t raw_capacity = 0;
  if (!input.take(&raw_capacity, sizeof raw_capacity)) return 0;
  const std::uint64_t capacity = 1 + raw_capacity % 8192;
  std::unique_ptr<char[]> output(new char[capacity]);

  std::string out, err;
  std::uint64_t received = 0;
  ReplyHeader first{};
  bool sizes_constant = true;
  for (;;) {
    ReplyHeader header;
    if (!input.take(&header, sizeof header)) return 0;
    input.take_padded(output.get(), capacity);
    std::string why;
    if (!spawnpool::detail::reply_chunk_is_valid(header, capacity, received, why)) {
      check(!why.empty(), "refused without a reason");
      return 0;
    }
    if (received == 0) {
      first = header;
      // collect() reserves this much on the first chunk, on the spawner's word: it must
      // stay bounded (announcing 2 TiB once made the driver throw std::bad_alloc).
      // Only small reservations are made here; big ones would cost 100x in speed.
      for (const std::uint64_t announced : {header.stdout_size, header.stderr_size}) {
        const std::uint64_t reserve = spawnpool::detail::reply_reserve_bytes(announced);
        check(reserve <= announced && reserve <= kReserveBound, "unbounded reservation");
      }
      if (header.stdout_size + header.stderr_size <= (1u << 20)) {
        out.reserve(spawnpool::detail::reply_reserve_bytes(header.stdout_size));
        err.reserve(spawnpool::detail::reply_reserve_bytes(header.stderr_size));
      }
    }
    sizes_constant = sizes_constant && header.stdout_size == first.stdout_size &&
                     header.stderr_size == first.stderr_size;
    spawnpool::detail::place_reply_chunk(header, output.get(), out, err);
    received += header.chunk_size;
    check(out.size() + err.size() == received, "placed bytes differ from the chunk sizes");
    if (received >= header.stdout_size + header.stderr_size) {
      if (sizes_constant)
        check(out.size() == header.stdout_size && err.size() == header.stderr_size,
              "complete output has the wrong split");
      return 0;
    }
  }
}
