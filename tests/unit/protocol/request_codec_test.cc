// encode_request / decode_request: round trips, the execve() limits, and a decoder that
// rejects whatever a broken or hostile writer of the shared segment could leave there.
#include <catch2/catch.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "worker_pool/protocol/protocol.h"
#include "worker_pool/protocol/request_codec.h"

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kArgMax = 2 * 1024 * 1024;
constexpr std::uint64_t kMaxArgStrlen = 32 * 4096;  // the kernel's MAX_ARG_STRLEN

// A slot's request area: header and payload, the payload pre-filled so that a write
// where none should happen shows.
constexpr std::uint32_t kNumber = 7;  // a request number the round trip must keep

struct RequestArea {
  explicit RequestArea(std::uint64_t capacity) : payload(capacity, '\x5a') {
    std::memset(&header, 0xab, sizeof header);
  }
  EncodeError encode(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     const std::string& cwd, std::uint32_t flags = 0,
                     std::uint64_t arg_max = kArgMax) {
    const RequestFields fields{&argv, &env, &cwd, flags, kNumber};
    return encode_request(fields, arg_max, payload.size(), &header, payload.data());
  }
  bool untouched() const {
    protocol::RequestHeader pristine;
    std::memset(&pristine, 0xab, sizeof pristine);
    return std::memcmp(&header, &pristine, sizeof header) == 0 &&
           payload.find_first_not_of('\x5a') == std::string::npos;
  }
  bool decode(DecodedRequest& out, std::string& why) const {
    return decode_request(header, payload.data(), payload.size(), out, why);
  }

  protocol::RequestHeader header;
  std::string payload;
};

std::vector<std::string> strings_of(const std::vector<char*>& pointers) {
  REQUIRE(!pointers.empty());
  REQUIRE(pointers.back() == nullptr);
  std::vector<std::string> out;
  for (std::size_t i = 0; i + 1 < pointers.size(); ++i) out.emplace_back(pointers[i]);
  return out;
}

// What execve() counts for `argv` and `env`: the strings with their NULs and the pointers.
std::uint64_t exec_bytes(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env) {
  std::uint64_t n = (argv.size() + env.size() + 2) * sizeof(char*);
  for (const auto& s : argv) n += s.size() + 1;
  for (const auto& s : env) n += s.size() + 1;
  return n;
}

TEST_CASE("request round trip keeps argv env cwd and flags", "[codec][request]") {
  const std::uint32_t flags = GENERATE(0u, std::uint32_t{protocol::kCaptureOutput},
                                       std::uint32_t{protocol::kCaptureOutput |
                                                     protocol::kMergeStderr},
                                       std::uint32_t{protocol::kSameCpuHandoff});
  const std::vector<std::string> argv = {"/usr/bin/cc", "-c", "", "a b.c", "\xff\x01 bytes"};
  const std::vector<std::string> env = {"PATH=/usr/bin", "EMPTY=", "X=a=b"};
  RequestArea area(4096);
  const EncodeError e = area.encode(argv, env, "/tmp/build dir", flags);
  REQUIRE(e.error_number == 0);
  CHECK(e.message.empty());
  CHECK(area.header.argc == argv.size());
  CHECK(area.header.envc == env.size());
  CHECK(area.header.flags == flags);
  CHECK(area.header.number == kNumber);

  DecodedRequest decoded;
  std::string why;
  REQUIRE(area.decode(decoded, why));
  CHECK(why.empty());
  CHECK(strings_of(decoded.argv) == argv);
  CHECK(strings_of(decoded.envp) == env);
  REQUIRE(decoded.cwd != nullptr);
  CHECK(std::string(decoded.cwd) == "/tmp/build dir");
  CHECK(decoded.flags == flags);
  CHECK(decoded.number == kNumber);

  SECTION("the decoded request is a copy the writer can no longer change") {
    std::fill(area.payload.begin(), area.payload.end(), 'X');
    CHECK(strings_of(decoded.argv) == argv);
    CHECK(std::string(decoded.cwd) == "/tmp/build dir");
  }
}

TEST_CASE("request with empty env and empty cwd", "[codec][request]") {
  RequestArea area(4096);
  REQUIRE(area.encode({"true"}, {}, "").error_number == 0);
  CHECK(area.header.payload_size == 5 + 1);
  DecodedRequest decoded;
  std::string why;
  REQUIRE(area.decode(decoded, why));
  CHECK(strings_of(decoded.argv) == std::vector<std::string>{"true"});
  CHECK(strings_of(decoded.envp).empty());
  CHECK(decoded.cwd == nullptr);  // stay in the spawner's cwd
}

TEST_CASE("decoder reuses its output between requests", "[codec][request]") {
  DecodedRequest decoded;
  std::string why;
  RequestArea first(4096), second(4096);
  REQUIRE(first.encode({"a", "b", "c"}, {"E=1", "F=2"}, "/x").error_number == 0);
  REQUIRE(second.encode({"z"}, {}, "").error_number == 0);
  REQUIRE(first.decode(decoded, why));
  REQUIRE(second.decode(decoded, why));
  CHECK(strings_of(decoded.argv) == std::vector<std::string>{"z"});
  CHECK(strings_of(decoded.envp).empty());
  CHECK(decoded.cwd == nullptr);
}

TEST_CASE("encoder refuses an empty argv or program name", "[codec][request]") {
  RequestArea area(4096);
  SECTION("no argv") {
    const EncodeError e = area.encode({}, {}, "");
    CHECK(e.error_number == EINVAL);
    CHECK_THAT(e.message, Catch::Contains("program name"));
  }
  SECTION("empty argv[0]") { CHECK(area.encode({"", "x"}, {}, "").error_number == EINVAL); }
  CHECK(area.untouched());
}

TEST_CASE("encoder refuses NUL bytes inside strings", "[codec][request]") {
  RequestArea area(4096);
  const std::string with_nul("a\0b", 3);
  SECTION("argument") {
    const EncodeError e = area.encode({"prog", with_nul}, {}, "");
    CHECK(e.error_number == EINVAL);
    CHECK_THAT(e.message, Catch::Contains("argument 1") && Catch::Contains("NUL"));
  }
  SECTION("environment entry") {
    const EncodeError e = area.encode({"prog"}, {"A=1", with_nul}, "");
    CHECK(e.error_number == EINVAL);
    CHECK_THAT(e.message, Catch::Contains("environment entry 1") && Catch::Contains("NUL"));
  }
  SECTION("working directory") {
    const EncodeError e = area.encode({"prog"}, {}, with_nul);
    CHECK(e.error_number == EINVAL);
    CHECK_THAT(e.message, Catch::Contains("working directory"));
  }
  CHECK(area.untouched());
}

TEST_CASE("encoder enforces the per-string limit of execve", "[codec][request][e2big]") {
  RequestArea area(kArgMax + 8192);
  SECTION("the largest argument passes") {
    CHECK(area.encode({"prog", std::string(kMaxArgStrlen - 1, 'a')}, {}, "").error_number == 0);
  }
  SECTION("one byte more is E2BIG") {
    const EncodeError e = area.encode({"prog", std::string(kMaxArgStrlen, 'a')}, {}, "");
    CHECK(e.error_number == E2BIG);
    CHECK_THAT(e.message, Catch::Contains("argument 1") &&
                              Catch::Contains(std::to_string(kMaxArgStrlen - 1)));
    CHECK(area.untouched());
  }
  SECTION("environment entries too") {
    const EncodeError e = area.encode({"prog"}, {"BIG=" + std::string(kMaxArgStrlen, 'v')}, "");
    CHECK(e.error_number == E2BIG);
    CHECK_THAT(e.message, Catch::Contains("environment entry 0"));
    CHECK(area.untouched());
  }
}

TEST_CASE("encoder enforces the total limit of execve", "[codec][request][e2big]") {
  const std::vector<std::string> argv = {"prog", std::string(1000, 'a'), std::string(2000, 'b')};
  const std::vector<std::string> env = {"A=" + std::string(500, 'c')};
  const std::uint64_t needed = exec_bytes(argv, env);
  RequestArea area(needed * 2);
  SECTION("exactly at the limit") {
    CHECK(area.encode(argv, env, "", 0, needed).error_number == 0);
  }
  SECTION("one byte over") {
    const EncodeError e = area.encode(argv, env, "", 0, needed - 1);
    CHECK(e.error_number == E2BIG);
    CHECK_THAT(e.message, Catch::Contains(std::to_string(needed)));
    CHECK(area.untouched());
  }
}

TEST_CASE("encoder enforces the slot capacity", "[codec][request][e2big]") {
  const std::vector<std::string> argv = {"prog", "arg"};
  const std::uint64_t size = 5 + 4 + 1;  // argv strings with NULs, then an empty cwd
  SECTION("a request that just fits") {
    RequestArea area(size);
    CHECK(area.encode(argv, {}, "").error_number == 0);
    CHECK(area.header.payload_size == size);
  }
  SECTION("one byte too many") {
    RequestArea area(size - 1);
    const EncodeError e = area.encode(argv, {}, "");
    CHECK(e.error_number == E2BIG);
    CHECK(area.untouched());
  }
}

TEST_CASE("encoder refuses a working directory longer than PATH_MAX", "[codec][request]") {
  RequestArea area(3 * PATH_MAX);
  const EncodeError e = area.encode({"prog"}, {}, "/" + std::string(PATH_MAX, 'd'));
  CHECK(e.error_number == ENAMETOOLONG);
  CHECK(area.untouched());
}

// A valid request, then one field corrupted as a broken writer might leave it.
TEST_CASE("decoder rejects malformed requests", "[codec][request][malformed]") {
  RequestArea area(256);
  REQUIRE(area.encode({"prog", "arg"}, {"A=1"}, "/cwd").error_number == 0);
  const std::uint64_t size = area.header.payload_size;
  DecodedRequest decoded;
  std::string why;

  SECTION("payload size zero") {
    area.header.payload_size = 0;
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "payload size out of range");
  }
  SECTION("payload size beyond the capacity") {
    area.header.payload_size = area.payload.size() + 1;
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "payload size out of range");
  }
  SECTION("unknown flag bits") {
    const std::uint32_t bit = GENERATE(3u, 5u, 31u);
    area.header.flags = protocol::kCaptureOutput | (1u << bit);
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "unknown request flags");
  }
  SECTION("argc zero") {
    area.header.argc = 0;
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "string counts out of range");
  }
  SECTION("counts beyond the payload, overflow included") {
    area.header.argc = GENERATE(std::uint32_t{1000}, UINT32_MAX);
    area.header.envc = UINT32_MAX;
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "string counts out of range");
  }
  SECTION("more strings announced than present") {
    area.header.envc = 3;
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "fewer strings than announced");
  }
  SECTION("fewer strings announced than present") {
    area.header.envc = 0;
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "trailing bytes after the last string");
  }
  SECTION("last string without its NUL") {
    area.payload[size - 1] = 'x';
    CHECK_FALSE(area.decode(decoded, why));
    CHECK(why == "payload does not end with a NUL");
  }
  SECTION("empty program name") {
    area.payload[0] = '\0';
    CHECK_FALSE(area.decode(decoded, why));
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("decoder rejects every truncation of a valid request", "[codec][request][malformed]") {
  RequestArea area(256);
  REQUIRE(area.encode({"prog", "arg", ""}, {"A=1", "B="}, "/some/dir").error_number == 0);
  const std::uint64_t size = area.header.payload_size;
  for (std::uint64_t cut = 0; cut < size; ++cut) {
    area.header.payload_size = cut;
    DecodedRequest decoded;
    std::string why;
    INFO("payload cut to " << cut << " of " << size << " bytes");
    CHECK_FALSE(area.decode(decoded, why));
    CHECK_FALSE(why.empty());
  }
}

// Whatever bytes a writer leaves, decoding either fails or yields strings that lie
// inside the decoded copy with NULL-terminated vectors.
TEST_CASE("decoder stays inside its copy for any single-byte corruption",
          "[codec][request][malformed]") {
  RequestArea area(128);
  REQUIRE(area.encode({"p", "ab"}, {"C=d"}, "/e").error_number == 0);
  const std::string original = area.payload;
  const std::uint64_t size = area.header.payload_size;
  for (std::uint64_t at = 0; at < size; ++at) {
    for (const char value : {'\0', 'x', '\xff'}) {
      area.payload = original;
      area.payload[at] = value;
      DecodedRequest decoded;
      std::string why;
      if (!area.decode(decoded, why)) continue;
      const char* begin = decoded.storage.data();
      const char* end = begin + decoded.storage.size();
      REQUIRE(decoded.argv.back() == nullptr);
      REQUIRE(decoded.envp.back() == nullptr);
      CHECK(decoded.argv.size() == 1 + area.header.argc);
      CHECK(decoded.envp.size() == 1 + area.header.envc);
      for (auto* vec : {&decoded.argv, &decoded.envp})
        for (std::size_t i = 0; i + 1 < vec->size(); ++i)
          CHECK(((*vec)[i] >= begin && (*vec)[i] + std::strlen((*vec)[i]) < end));
      CHECK(decoded.argv[0][0] != '\0');
    }
  }
}

}  // namespace
}  // namespace spawnpool::detail
