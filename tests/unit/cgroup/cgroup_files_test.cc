// The spawner's cgroup argument and the parsing of cgroup interface files: pure
// functions, plus reads through descriptors of ordinary files.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_config.h"
#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {
namespace {

SlotCgroupConfig sample_config() {
  SlotCgroupConfig config;
  config.version = CgroupVersion::kV2;
  config.slot = 7;
  config.flags = kDriverLeftHome | kEnabledMemoryAtHome;
  config.driver_pid = 4242;
  config.pool_dir = "/sys/fs/cgroup/user.slice/a:b/spawnpool-4242-00ff";
  return config;
}

TEST_CASE("the cgroup argument round-trips, colons in the directory included", "[cgroup][config]") {
  const SlotCgroupConfig config = sample_config();
  const std::string text = encode_slot_cgroup(config);
  SlotCgroupConfig decoded;
  std::string why;
  REQUIRE(decode_slot_cgroup(text, decoded, why));
  CHECK(decoded.version == config.version);
  CHECK(decoded.slot == 7);
  CHECK(decoded.flags == config.flags);
  CHECK(decoded.driver_pid == 4242);
  CHECK(decoded.pool_dir == config.pool_dir);
  CHECK(slot_dir(decoded) == config.pool_dir + "/slot-7");
}

TEST_CASE("a malformed cgroup argument is refused with a reason", "[cgroup][config]") {
  const char* bad = GENERATE("", "2", "2:1:0:1", "3:1:0:1:/x", "0:1:0:1:/x", "2:1:4:1:/x",
                             "2:-1:0:1:/x", "2:1:0:1:relative", "2:1:0:1:/", "2:1:0:1:/x/",
                             "2:99999999999:0:1:/x", "2::0:1:/x", "2:1:0:x:/x");
  SlotCgroupConfig decoded;
  std::string why;
  INFO("argument '" << bad << "'");
  CHECK_FALSE(decode_slot_cgroup(bad, decoded, why));
  CHECK_FALSE(why.empty());
}

TEST_CASE("keyed values, pid lists and limits parse as the kernel writes them", "[cgroup][files]") {
  std::int64_t value = 0;
  const std::string events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
  REQUIRE(find_keyed_value(events, "oom_kill", value));
  CHECK(value == 2);
  REQUIRE(find_keyed_value(events, "oom", value));
  CHECK(value == 3);  // not confused with oom_kill or oom_group_kill
  CHECK_FALSE(find_keyed_value(events, "populated", value));
  REQUIRE(find_keyed_value("oom_kill_disable 0\nunder_oom 0\noom_kill 5", "oom_kill", value));
  CHECK(value == 5);

  CHECK(parse_pid_list("12\n345\n\n6\n") == std::vector<pid_t>{12, 345, 6});
  CHECK(parse_pid_list("").empty());

  test::TempDir dir;
  const auto value_of = [&](const std::string& text, std::int64_t& out) {
    std::ofstream(dir / "f", std::ios::trunc) << text;
    const int fd = open_at(AT_FDCWD, (dir / "f").c_str(), O_RDONLY);
    const bool ok = read_int64(fd, out);
    close(fd);
    return ok;
  };
  REQUIRE(value_of("9223372036854771712\n", value));
  CHECK(value == 9223372036854771712LL);
  REQUIRE(value_of("max\n", value));
  CHECK(value == kNoLimit);
  CHECK_FALSE(value_of("99999999999999999999\n", value));  // beyond int64: refused
  CHECK_FALSE(value_of("12x\n", value));
  CHECK_FALSE(value_of("", value));
}

TEST_CASE("a controller list names a controller as a whole word", "[cgroup][files]") {
  CHECK(lists_controller("cpuset cpu io memory pids\n", "memory"));
  CHECK(lists_controller("memory", "memory"));
  CHECK(lists_controller("memory pids", "memory"));
  CHECK_FALSE(lists_controller("cpu io pids\n", "memory"));
  CHECK_FALSE(lists_controller("memoryx hugememory\n", "memory"));
  CHECK_FALSE(lists_controller("", "memory"));
  CHECK_FALSE(lists_controller("\n", "memory"));
}

TEST_CASE("writes go to offset 0, one value per write", "[cgroup][files]") {
  test::TempDir dir;
  std::ofstream(dir / "f") << "";
  REQUIRE(write_file_text(dir / "f", "123"));
  const int fd = open_at(AT_FDCWD, (dir / "f").c_str(), O_RDWR);
  REQUIRE(write_text(fd, "4"));
  std::string text;
  REQUIRE(read_all(fd, text));
  close(fd);
  CHECK(text == "423");
  CHECK_FALSE(write_file_text(dir / "missing", "1"));
  CHECK(errno == ENOENT);
  CHECK(cgroup_version_of(dir.path()) == CgroupVersion::kNone);
}

}  // namespace
}  // namespace spawnpool::detail
