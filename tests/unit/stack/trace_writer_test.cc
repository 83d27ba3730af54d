// The trace writer (engine/src/stack/trace_writer.h): the file parses as JSON after every
// event, with the events and fields the Python trace.py wrote (the build report and its
// tests read them), from many threads at once, and a full disk stops tracing, leaving a
// valid file. Its JSON strings (trace_json.h) are checked byte for byte.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/src/command/console.h"
#include "engine/src/stack/trace_json.h"
#include "engine/src/stack/trace_writer.h"
#include "tests/unit/support/test_skip.h"
#include "tests/unit/support/test_support.h"

#if __has_include(<boost/json/src.hpp>)
#include <boost/json/src.hpp>  // header-only Boost.JSON: a real parser to check with
#define SPAWNPOOL_HAVE_JSON 1
#endif

namespace spawnpool::test {
namespace {

using detail::TraceWriter;
constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kMiB = 1 << 20;

// A trace file in a directory of its own, removed with it.
struct TraceFile {
  TempDir dir;
  const std::string path = dir / "trace.json";
};

Result ran(int slot, std::int64_t base, int returncode = 0) {
  Result r;
  r.returncode = returncode;
  r.slot = slot;
  r.submitted_ns = base;
  r.dispatched_ns = base + kMs;
  r.started_ns = base + 2 * kMs;
  r.exited_ns = base + 12 * kMs;
  r.completed_ns = base + 13 * kMs;
  r.user_time = 0.5;
  r.system_time = 0.25;
  r.max_rss_kb = 1234;
  return r;
}

std::string json_string(std::string_view text,
                        detail::json::Invalid invalid = detail::json::Invalid::kSurrogateEscape) {
  std::string out;
  detail::json::append_string(out, text, invalid);
  return out;
}

TEST_CASE("trace JSON strings: escapes, UTF-8 kept, invalid bytes as Python wrote them") {
  using detail::json::Invalid;
  CHECK(json_string("cc -c \"a b.c\" \\ x") == R"("cc -c \"a b.c\" \\ x")");
  CHECK(json_string("a\nb\tc\r\x01\x1f") == R"("a\nb\tc\r\u0001\u001f")");
  CHECK(json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");   // valid UTF-8 stays as it is
  CHECK(json_string("\xe2\x80\xa8|\xe2\x80\xa9") == R"("\u2028|\u2029")");
  // A command line's invalid bytes: surrogateescape, as Python's str of it was dumped.
  CHECK(json_string("x\xff\xc3(") == R"("x\udcff\udcc3(")");
  CHECK(json_string("\xed\xa0\x80") == R"("\udced\udca0\udc80")");  // a surrogate, encoded
  // Output: one U+FFFD per maximal invalid subpart, as bytes.decode('utf-8', 'replace').
  CHECK(json_string("err \xff\n", Invalid::kReplace) == R"("err \ufffd\n")");
  CHECK(json_string("\xe2\x82(\xf0\x9f\x98", Invalid::kReplace) == R"("\ufffd(\ufffd")");
  CHECK(json_string("\xc0\xaf", Invalid::kReplace) == R"("\ufffd\ufffd")");  // overlong

  std::string title;
  detail::json::append_title(title, std::string(80, 'a'), 80);
  CHECK(title == '"' + std::string(80, 'a') + '"');
  title.clear();
  detail::json::append_title(title, std::string(81, 'a'), 80);
  CHECK(title == '"' + std::string(77, 'a') + "...\"");
  title.clear();  // 80 characters in 160 bytes: whole
  std::string wide;
  for (int i = 0; i < 80; ++i) wide += "\xc3\xa9";
  detail::json::append_title(title, wide, 80);
  CHECK(title == '"' + wide + '"');

  std::string cut;  // a character split between stdout and stderr is one character
  detail::json::append_text_cut(cut, "ab\xc3", "\xa9" "cdef", 4);
  CHECK(cut == "\"ab\xc3\xa9" "c\\n... (3 more characters)\"");
  cut.clear();
  detail::json::append_text_cut(cut, "ab", "", 4);
  CHECK(cut == R"("ab")");

  std::string numbers;
  detail::json::append_fixed(numbers, 2000.0, 3);
  numbers += ' ';
  detail::json::append_fixed(numbers, 0.25, 6);
  numbers += ' ';
  detail::json::append_fixed(numbers, 1.0004, 3);
  numbers += ' ';
  detail::json::append_fixed(numbers, -1.5, 1);
  numbers += ' ';
  detail::json::append_int(numbers, -42);
  CHECK(numbers == "2000.0 0.25 1.0 -1.5 -42");
}

#ifdef SPAWNPOOL_HAVE_JSON

boost::json::object parse_trace(const std::string& path) {
  boost::json::value value = boost::json::parse(read_file(path));  // throws if not JSON
  return value.as_object();
}

std::string str(const boost::json::value& value) { return std::string(value.as_string()); }

std::vector<boost::json::object> events(const std::string& path, std::string_view ph) {
  std::vector<boost::json::object> out;
  const boost::json::object trace = parse_trace(path);
  REQUIRE(trace.at("displayTimeUnit") == "ms");
  for (const auto& event : trace.at("traceEvents").as_array())
    if (event.at("ph") == boost::json::string_view(ph.data(), ph.size()))
      out.push_back(event.as_object());
  return out;
}

TEST_CASE("the trace is valid JSON after every event, with trace.py's fields") {
  const TraceFile file;
  TraceWriter trace(file.path);
  CHECK(events(file.path, "X").empty());
  const std::int64_t base = trace.origin_ns();
  for (int i = 0; i < 5; ++i) {
    trace.add(ran(i % 2, base, i), "cc -c \"f" + std::to_string(i) + ".c\" \\ \xc3\xa9");
    const auto got = events(file.path, "X");
    REQUIRE(got.size() == static_cast<std::size_t>(i + 1));
    CHECK(str(got.back().at("args").at("command")) ==
          "cc -c \"f" + std::to_string(i) + ".c\" \\ \xc3\xa9");
  }
  const boost::json::object first = events(file.path, "X").front();
  CHECK(first.at("name") == "cc -c \"f0.c\" \\ \xc3\xa9");
  CHECK(first.at("cat") == "command");
  CHECK(first.at("pid") == ::getpid());
  CHECK(first.at("tid") == 0);
  CHECK(first.at("ts") == 2000.0);
  CHECK(first.at("dur") == 10000.0);
  const boost::json::object expected_args{
      {"command", "cc -c \"f0.c\" \\ \xc3\xa9"}, {"returncode", 0}, {"user_time_s", 0.5},
      {"system_time_s", 0.25}, {"max_rss_kb", 1234}, {"queue_wait_ms", 1.0},
      {"pool_overhead_ms", 2.0}};
  CHECK(first.at("args").as_object() == expected_args);

  Result refused;
  refused.failure = FailureStage::kExec;
  refused.error_number = ENOENT;
  refused.error_message = "No such file";
  refused.completed_ns = base + 20 * kMs;
  trace.add(refused, "nope");
  const auto instants = events(file.path, "i");
  REQUIRE(instants.size() == 1);
  CHECK(instants[0].at("s") == "p");
  CHECK(instants[0].at("tid") == 0);
  CHECK(instants[0].at("ts") == 20000.0);
  const boost::json::object refused_args{
      {"command", "nope"}, {"error", "No such file"}, {"stage", "exec"}};
  CHECK(instants[0].at("args").as_object() == refused_args);

  std::vector<std::string> names;
  for (const auto& e : events(file.path, "M")) names.emplace_back(e.at("args").at("name").as_string());
  CHECK(names == std::vector<std::string>{"spawnpool", "slot 0", "slot 1"});
  trace.close();
  trace.close();
  trace.add(ran(0, base), "after close");  // records nothing
  CHECK(events(file.path, "X").size() == 5);
}

TEST_CASE("the trace has what the report reads: build line, memory, output, extra args") {
  const TraceFile file;
  TraceWriter trace(file.path, "scons", "scons -j2 x");
  const std::int64_t base = trace.origin_ns();
  Result memory = ran(1, base);
  memory.predicted_peak_bytes = 64 * kMiB;
  memory.peak_memory_bytes = 80 * kMiB;
  memory.memory_source = MemorySource::kCgroup;
  memory.oom_retries = 1;
  memory.predicted_in_use_bytes = 192 * kMiB;
  memory.measured_in_use_bytes = 150 * kMiB;
  memory.memory_wait_ns = kMs / 2;
  trace.add(memory, "retried", R"("targets":["a.o"],"inputs":["a.c"])");
  Result failing = ran(0, base, 1);
  failing.captured = true;
  failing.stdout_data = "out\n";
  failing.stderr_data = std::string(TraceWriter::kOutputCharacters, 'e') + "\xff!";
  failing.jobserver_wait_ns = kMs / 2;
  failing.slot_wait_ns = kMs;
  trace.add(failing, "failing");
  Result uncaptured = ran(0, base, 2);
  trace.add(uncaptured, "not captured");

  const auto ranx = events(file.path, "X");
  REQUIRE(ranx.size() == 3);
  const auto& retried = ranx[0].at("args").as_object();
  CHECK(retried.at("targets").as_array() == boost::json::array{"a.o"});
  CHECK(retried.at("inputs").as_array() == boost::json::array{"a.c"});
  CHECK(retried.at("peak_memory_mib") == 80.0);
  CHECK(retried.at("predicted_peak_mib") == 64.0);
  CHECK(retried.at("memory_source") == "cgroup");
  CHECK(retried.at("memory_wait_ms") == 0.5);
  CHECK(retried.at("oom_retries") == 1);
  CHECK(retried.at("oom_killed") == false);
  CHECK(!retried.contains("output"));
  const auto counters = events(file.path, "C");
  REQUIRE(counters.size() == 1);
  CHECK(counters[0].at("name") == "memory in use");
  const boost::json::object in_use{{"predicted_MiB", 192.0}, {"measured_MiB", 150.0}};
  CHECK(counters[0].at("args").as_object() == in_use);
  CHECK(counters[0].at("ts").as_double() == ranx[0].at("ts").as_double() - 1000.0);
  const auto oom = events(file.path, "i");
  REQUIRE(oom.size() == 1);
  CHECK(oom[0].at("name") == "OOM kill: run again alone");
  CHECK(oom[0].at("cat") == "memory");
  CHECK(oom[0].at("tid") == 1);
  CHECK(oom[0].at("ts") == 2000.0);

  const auto& failed = ranx[1].at("args").as_object();
  // The first 16000 characters of stdout then stderr, and how many more there were.
  CHECK(str(failed.at("output")) == "out\n" + std::string(TraceWriter::kOutputCharacters - 4, 'e') +
                                   "\n... (6 more characters)");
  CHECK(failed.at("jobserver_wait_ms") == 0.5);
  CHECK(failed.at("slot_wait_ms") == 1.0);
  CHECK(!failed.contains("local_slot_wait_ms"));
  CHECK(!failed.contains("peak_memory_mib"));  // no memory admission: no memory fields
  CHECK(!ranx[2].at("args").as_object().contains("output"));  // its output was not captured

  std::vector<boost::json::object> builds;
  for (const auto& e : events(file.path, "M"))
    if (e.at("name") == "spawnpool_build") builds.push_back(e.at("args").as_object());
  REQUIRE(builds.size() == 2);
  CHECK(builds[0] == boost::json::object{{"command_line", "scons -j2 x"}});
  CHECK(builds[1] == boost::json::object{{"memory_mode", "cgroup per command"}});
}

TEST_CASE("the trace from 4 threads at once holds every event, valid") {
  const TraceFile file;
  TraceWriter trace(file.path);
  constexpr int kThreads = 4, kEach = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&trace, t] {
      for (int i = 0; i < kEach; ++i) {
        Result r = ran(t, trace.origin_ns(), i % 3 == 0 ? 1 : 0);
        r.captured = i % 3 == 0;
        r.stderr_data = "error " + std::to_string(i);
        trace.add(r, "cmd " + std::to_string(t) + " " + std::to_string(i));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  trace.close();
  const auto all = events(file.path, "X");
  CHECK(all.size() == static_cast<std::size_t>(kThreads * kEach));
  std::vector<int> per_slot(kThreads);
  for (const auto& e : all) ++per_slot.at(static_cast<std::size_t>(e.at("tid").as_int64()));
  CHECK(per_slot == std::vector<int>(kThreads, kEach));
  CHECK(events(file.path, "M").size() == 1 + kThreads);  // process_name, each slot once
}

std::string g_messages;  // what the console got (the full-disk case)
void keep_message(std::string_view text) { g_messages += text; }
void keep_block(std::string_view, std::string_view) {}

TEST_CASE("a full disk stops the trace with one message and leaves a valid file") {
  const TraceFile file;
  TraceWriter trace(file.path);
  for (int i = 0; i < 3; ++i) trace.add(ran(0, trace.origin_ns()), "before");
  // RLIMIT_FSIZE (which root has too): writing past it fails with EFBIG, as the file
  // system would with ENOSPC, once SIGXFSZ is ignored.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGXFSZ, &ignore, &previous) == 0);
  const off_t size = static_cast<off_t>(std::filesystem::file_size(file.path));
  rlimit capped = old;
  capped.rlim_cur = static_cast<rlim_t>(size + 2000);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &capped) == 0);
  detail::console::set_writer({keep_message, keep_block});
  g_messages.clear();
  int added = 0;
  for (; added < 100 && trace.fd() >= 0; ++added) trace.add(ran(0, trace.origin_ns()), "during");
  detail::console::set_writer({});
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &previous, nullptr);

  CHECK(trace.fd() == -1);
  CHECK(added > 1);
  trace.add(ran(0, trace.origin_ns()), "after");  // stopped: no write, no message
  const std::string expected =
      "spawnpool: trace " + file.path + ": " + std::strerror(EFBIG) + "; tracing stopped\n";
  CHECK(g_messages == expected);
  const auto kept = events(file.path, "X");  // parses: the tail is whole
  CHECK(kept.size() == static_cast<std::size_t>(3 + added - 1));
  CHECK(kept.back().at("args").at("command") == "during");
}

#else

TEST_CASE("the trace's JSON checks") {
  TEST_SKIP_UNLESS(false, "no Boost.JSON (boost/json/src.hpp) to parse the trace with");
}

#endif

TEST_CASE("a trace that cannot be written at all is an error at creation") {
  TEST_SKIP_UNLESS(::access("/dev/full", W_OK) == 0, "no writable /dev/full");
  try {
    TraceWriter trace("/dev/full");
    FAIL("/dev/full took the trace");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOSPC);
  }
  try {
    TempDir dir;
    TraceWriter trace(dir / "no-such-dir/t.json");
    FAIL("a trace in a missing directory");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOENT);
  }
}

}  // namespace
}  // namespace spawnpool::test
