// libFuzzer target: the spawner's decoding of a request area another process wrote.
// Input layout: a protocol::RequestHeader (24 bytes) then the payload; the slot's
// capacity is the payload's length, held in a buffer of exactly that size so that any
// read past it is caught by AddressSanitizer. Single-threaded.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "worker_pool/protocol/request_codec.h"

namespace {

using spawnpool::detail::DecodedRequest;
using spawnpool::protocol::RequestHeader;

// Aborts with a message: libFuzzer records the input as a crash.
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_decode_request: invariant broken: %s\n", what);
    std::abort();
  }
}

bool inside(const DecodedRequest& r, const char* p) {
  return p >= r.storage.data() && p < r.storage.data() + r.storage.size();
}

// What a successful decode promises the launcher (which hands argv/envp to execve).
void check_decoded(const RequestHeader& header, const DecodedRequest& r) {
  check(r.argv.size() == header.argc + 1u && r.argv.back() == nullptr, "argv count");
  check(r.envp.size() == header.envc + 1u && r.envp.back() == nullptr, "envp count");
  check(r.argv[0][0] != '\0', "empty program name accepted");
  check((r.flags & ~spawnpool::protocol::kKnownRequestFlags) == 0, "unknown flags accepted");
  for (std::size_t i = 0; i + 1 < r.argv.size(); ++i) check(inside(r, r.argv[i]), "argv pointer");
  for (std::size_t i = 0; i + 1 < r.envp.size(); ++i) check(inside(r, r.envp[i]), "envp pointer");
  check(r.cwd == nullptr || (inside(r, r.cwd) && *r.cwd), "cwd pointer");
  check(r.storage.back() == '\0', "unterminated storage");
}

// Encoding what was decoded must give back the original bytes (when the encoder's own
// limits, stricter than the decoder's, accept it).
void check_round_trip(const RequestHeader& header, const DecodedRequest& r,
                      const char* payload) {
  std::vector<std::string> argv(r.argv.begin(), r.argv.end() - 1);
  std::vector<std::string> env(r.envp.begin(), r.envp.end() - 1);
  const std::string cwd = r.cwd ? r.cwd : "";
  const spawnpool::detail::RequestFields fields{&argv, &env, &cwd, r.flags, r.number};
  RequestHeader again{};
  std::vector<char> out(header.payload_size);
  const auto error = spawnpool::detail::encode_request(fields, 1u << 30, out.size(), &again,
                                                       out.data());
  if (error.error_number) return;
  check(again.argc == header.argc && again.envc == header.envc &&
            again.flags == header.flags && again.payload_size == header.payload_size,
        "re-encoded header differs");
  check(std::memcmp(out.data(), payload, out.size()) == 0, "re-encoded payload differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < sizeof(RequestHeader)) return 0;
  RequestHeader header;
  std::memcpy(&header, data, sizeof header);
  const std::size_t capacity = size - sizeof header;
  // Exactly `capacity` bytes on the heap: an overread lands in ASan's redzone.
  std::unique_ptr<char[]> payload(new char[capacity ? capacity : 1]);
  std::memcpy(payload.get(), data + sizeof header, capacity);

  DecodedRequest decoded;
  std::string why;
  if (!spawnpool::detail::decode_request(header, payload.get(), capacity, decoded, why)) {
    check(!why.empty(), "rejected without a reason");
    return 0;
  }
  check_decoded(header, decoded);
  check_round_trip(header, decoded, payload.get());
  return 0;
}
