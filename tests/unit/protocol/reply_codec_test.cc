// reply_chunk_is_valid / place_reply_chunk: output cut into chunks (stdout followed by
// stderr) comes back byte-exact, and chunks a broken spawner could write are refused.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "tests/helpers/pattern.h"
#include "worker_pool/protocol/protocol.h"
#include "worker_pool/protocol/reply_codec.h"

namespace spawnpool::detail {
namespace {

protocol::ReplyHeader header_for(std::uint64_t stdout_size, std::uint64_t stderr_size,
                                 std::uint64_t offset, std::uint64_t size) {
  protocol::ReplyHeader h{};
  h.stdout_size = stdout_size;
  h.stderr_size = stderr_size;
  h.chunk_offset = offset;
  h.chunk_size = size;
  return h;
}

TEST_CASE("reply chunks reassemble stdout and stderr byte-exact", "[codec][reply]") {
  const std::uint64_t capacity = GENERATE(1, 7, 4096, 1 << 20);
  const std::uint64_t out_size = GENERATE(0, 1, 4095, 4096, 100000);
  const std::uint64_t err_size = GENERATE(0, 1, 4097, 100000);
  const std::string out = test::pattern(1, out_size);
  const std::string err = test::pattern(2, err_size);
  const std::string stream = out + err;
  if (capacity == 1 && stream.size() > 10000) return;  // slow and adds nothing

  std::string got_out, got_err;
  std::uint64_t received = 0;
  int chunks = 0;
  do {  // as the spawner cuts it; an empty output still takes one (empty) chunk
    const std::uint64_t size = std::min(capacity, stream.size() - received);
    const auto h = header_for(out_size, err_size, received, size);
    std::string why;
    REQUIRE(reply_chunk_is_valid(h, capacity, received, why));
    place_reply_chunk(h, stream.data() + received, got_out, got_err);
    received += size;
    ++chunks;
  } while (received < stream.size());
  const std::uint64_t expected_chunks = (stream.size() + capacity - 1) / capacity;
  CHECK(static_cast<std::uint64_t>(chunks) == std::max<std::uint64_t>(1, expected_chunks));
  CHECK(got_out.size() == out.size());
  CHECK(got_err.size() == err.size());
  CHECK(got_out == out);
  CHECK(got_err == err);
}

TEST_CASE("failure replies without output are valid", "[codec][reply]") {
  const int stage = GENERATE(0, 1, 2, 3, 4);
  auto h = header_for(0, 0, 0, 0);
  h.failure_stage = stage;
  h.error_number = 2;
  std::string why;
  CHECK(reply_chunk_is_valid(h, 4096, 0, why));
}

TEST_CASE("reply chunk validation refuses broken chunks", "[codec][reply][malformed]") {
  const std::uint64_t capacity = 4096;
  std::string why;
  SECTION("unknown failure stage") {
    auto h = header_for(0, 0, 0, 0);
    h.failure_stage = GENERATE(-1, 5, 6, 1000);  // 5, 6: the engine's own stages
    CHECK_FALSE(reply_chunk_is_valid(h, capacity, 0, why));
    CHECK(why == "unknown failure stage");
  }
  SECTION("output sizes beyond the cap, overflow included") {
    auto h = header_for(kMaxCapturedBytes + 1, 0, 0, 0);
    CHECK_FALSE(reply_chunk_is_valid(h, capacity, 0, why));
    h = header_for(0, ~std::uint64_t{0}, 0, 0);
    CHECK_FALSE(reply_chunk_is_valid(h, capacity, 0, why));
    h = header_for(~std::uint64_t{0}, 1, 0, 1);
    CHECK_FALSE(reply_chunk_is_valid(h, capacity, 0, why));
    CHECK(why == "output size out of range");
  }
  SECTION("chunk offset is not what was received") {
    CHECK_FALSE(reply_chunk_is_valid(header_for(10000, 0, 4096, 4096), capacity, 0, why));
    CHECK_FALSE(reply_chunk_is_valid(header_for(10000, 0, 0, 4096), capacity, 4096, why));
    CHECK(why == "chunk out of sequence");
  }
  SECTION("chunk larger than the output area") {
    CHECK_FALSE(reply_chunk_is_valid(header_for(10000, 0, 0, capacity + 1), capacity, 0, why));
    CHECK(why == "chunk out of sequence");
  }
  SECTION("chunk beyond the announced output") {
    CHECK_FALSE(reply_chunk_is_valid(header_for(10, 5, 0, 16), capacity, 0, why));
    CHECK_FALSE(reply_chunk_is_valid(header_for(10, 5, 8, 8), capacity, 8, why));
    CHECK(why == "chunk out of sequence");
  }
  SECTION("empty chunk while output is missing") {
    CHECK_FALSE(reply_chunk_is_valid(header_for(10, 0, 0, 0), capacity, 0, why));
    CHECK_FALSE(reply_chunk_is_valid(header_for(10, 10, 10, 0), capacity, 10, why));
    CHECK(why == "chunk out of sequence");
  }
  SECTION("the valid neighbours of those cases pass") {
    CHECK(reply_chunk_is_valid(header_for(10, 5, 0, 15), capacity, 0, why));
    CHECK(reply_chunk_is_valid(header_for(10, 5, 8, 7), capacity, 8, why));
    CHECK(reply_chunk_is_valid(header_for(kMaxCapturedBytes, kMaxCapturedBytes, 0, capacity),
                               capacity, 0, why));
  }
}

}  // namespace
}  // namespace spawnpool::detail
