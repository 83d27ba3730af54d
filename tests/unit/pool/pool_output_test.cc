// Where output goes: the driver's stdout/stderr as they were at pool start, captured
// stdout and stderr apart, or merged in write order; large output byte-exact through
// many reply chunks; a background grandchild holding the pipe does not hang the run.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "spawnpool/pool.h"
#include "tests/helpers/pattern.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

// Points this process's `fd` (1 or 2) at the file `path` for a scope.
class RedirectedFd {
 public:
  RedirectedFd(int fd, const std::string& path) : fd_(fd) {
    flush_all();
    saved_ = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(saved_ >= 0);
    REQUIRE(file >= 0);
    dup2(file, fd);
    close(file);
  }
  ~RedirectedFd() {
    flush_all();
    dup2(saved_, fd_);
    close(saved_);
  }
  RedirectedFd(const RedirectedFd&) = delete;
  RedirectedFd& operator=(const RedirectedFd&) = delete;

 private:
  static void flush_all() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
  }
  int fd_;
  int saved_ = -1;
};

// Index of the first byte where `got` and `want` differ, or -1: a failure then names
// one offset instead of printing megabytes.
long long first_difference(const std::string& got, const std::string& want) {
  const auto mismatch = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  if (mismatch.first == got.end() && mismatch.second == want.end()) return -1;
  return mismatch.first - got.begin();
}

TEST_CASE("passthrough output goes to the driver's stdout and stderr of pool start",
          "[pool][output]") {
  LeakCheck leaks;
  {
    TempDir dir;
    std::optional<Pool> pool;
    {
      RedirectedFd out(1, dir / "stdout.txt");
      RedirectedFd err(2, dir / "stderr.txt");
      pool.emplace(pool_options(1));
    }
    // The driver's fds are back to what they were; the spawner keeps the files.
    const Result r = pool->run(helper_command(
        "write_streams", {"out:to stdout\n", "err:to stderr\n", "out:again\n"},
        OutputMode::kPassthrough));
    CHECK(r.returncode == 0);
    CHECK_FALSE(r.captured);
    CHECK(r.stdout_data.empty());
    CHECK(r.stderr_data.empty());
    pool.reset();
    CHECK(read_file(dir / "stdout.txt") == "to stdout\nagain\n");
    CHECK(read_file(dir / "stderr.txt") == "to stderr\n");
  }
  leaks.verify();
}

TEST_CASE("captured output keeps stdout and stderr apart", "[pool][output]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const Result r = pool.run(helper_command(
        "write_streams", {"out:one ", "err:two ", "out:three", "err:four"}));
    CHECK(r.returncode == 0);
    CHECK(r.captured);
    CHECK(r.stdout_data == "one three");
    CHECK(r.stderr_data == "two four");
  }
  leaks.verify();
}

TEST_CASE("merged capture keeps the write order in stdout", "[pool][output]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const Result r = pool.run(helper_command(
        "write_streams", {"out:1 ", "err:2 ", "out:3 ", "err:4"}, OutputMode::kCaptureMerged));
    CHECK(r.returncode == 0);
    CHECK(r.captured);
    CHECK(r.stdout_data == "1 2 3 4");
    CHECK(r.stderr_data.empty());
  }
  leaks.verify();
}

TEST_CASE("captured output of any size comes back byte-exact", "[pool][output][large]") {
  const std::size_t chunk = GENERATE(4096, 1 << 20);
  const auto sizes = GENERATE(table<std::uint64_t, std::uint64_t>({
      {0, 0}, {1, 0}, {0, 1}, {4095, 4097}, {4096, 4096}, {1 << 20, (1 << 20) + 1},
      {10 * 1000 * 1000, 10 * 1000 * 1000}}));
  const std::uint64_t out_size = std::get<0>(sizes), err_size = std::get<1>(sizes);
  LeakCheck leaks;
  {
    PoolOptions options = pool_options(1);
    options.output_chunk_bytes = chunk;
    Pool pool(options);
    const Result r = pool.run(
        helper_command("print_bytes", {std::to_string(out_size), std::to_string(err_size)}));
    REQUIRE(r.returncode == 0);
    CHECK(r.stdout_data.size() == out_size);
    CHECK(r.stderr_data.size() == err_size);
    CHECK(first_difference(r.stdout_data, pattern(1, out_size)) == -1);
    CHECK(first_difference(r.stderr_data, pattern(2, err_size)) == -1);
    // The spawner serves the next command normally after a long transfer.
    const Result next = pool.run(helper_command("write_streams", {"out:next"}));
    CHECK(next.stdout_data == "next");
    CHECK(next.stderr_data.empty());
  }
  leaks.verify();
}

TEST_CASE("large merged output keeps the write order", "[pool][output][large]") {
  LeakCheck leaks;
  {
    PoolOptions options = pool_options(1);
    options.output_chunk_bytes = 1 << 16;
    Pool pool(options);
    const std::uint64_t size = 10 * 1000 * 1000;
    const Result r = pool.run(helper_command(
        "print_bytes", {std::to_string(size), std::to_string(size)}, OutputMode::kCaptureMerged));
    REQUIRE(r.returncode == 0);
    // print_bytes alternates 64 KiB blocks of stdout and stderr.
    const std::string out = pattern(1, size), err = pattern(2, size);
    std::string want;
    for (std::uint64_t at = 0; at < size; at += 65536) {
      want.append(out, at, 65536);
      want.append(err, at, 65536);
    }
    CHECK(r.stdout_data.size() == 2 * size);
    CHECK(first_difference(r.stdout_data, want) == -1);
    CHECK(r.stderr_data.empty());
  }
  leaks.verify();
}

TEST_CASE("a background grandchild holding stdout does not hang a captured run",
          "[pool][output][grandchild]") {
  const OutputMode mode = GENERATE(OutputMode::kCapture, OutputMode::kCaptureMerged);
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const auto start = std::chrono::steady_clock::now();
    const Result r = pool.run(helper_command("spawn_grandchild", {"60"}, mode));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    REQUIRE(r.returncode == 0);
    CHECK(elapsed < std::chrono::seconds(20));  // not the grandchild's 60 s
    const int grandchild = std::atoi(r.stdout_data.c_str());
    REQUIRE(grandchild > 0);
    CHECK_FALSE(process_gone(grandchild));
    kill(grandchild, SIGKILL);
    CHECK(wait_until([&] { return process_gone(grandchild); }));
    // The slot is usable at once.
    CHECK(pool.run(helper_command("exit_with", {"9"})).returncode == 9);
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
