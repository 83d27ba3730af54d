// A tiny build driver in C++ on spawnpool's command stack, the one the SCons plugin and
// `spawnpool run` use: it runs the shell commands of a file, one per line, from -j driver
// threads, with every feature a build gets there (a compiler launcher for the compiles,
// make's jobserver, output printed as one block per command, a Chrome trace, the
// end-of-build statistics, memory admission). A line `---` ends a stage: what follows
// starts once everything before it has ended (the compiles, then the link).
//
//   build_driver [-j N] [--launcher CMD] [--compilers LIST] [--local N] [--output=sync]
//                [--trace FILE] [--report FILE] [--stats] [--memory BUDGET] [--history FILE]
//                [--status MODE] [--direct-exec yes|no] [--jobserver yes|no]
//                [--same-cpu-handoff yes|no] COMMANDS_FILE
//
// The options are those of `spawnpool run` (docs/features.md), spelled with a space.
//
// With a launcher, the commands it does not take (the links) run at most --local N at
// once on this machine (default: spawnpool::default_local_slots, the usable CPUs).
// --status auto|line|plain|off (default auto: a line at the bottom of a terminal, nothing
// into a pipe) shows the build's progress with an ETA learned in --history, which is kept
// where the status line or memory admission reads it (spawnpool::history_path). --report
// writes the HTML report at the end (SessionOptions::report_path: the session records
// the trace for it, in a temporary file without --trace).
//
// Under `make` (a recipe line starting with '+'), make's jobserver bounds how many
// commands run at once: the pool's scheduler takes a token for each command beyond the
// first, together with its slot and its memory. Exit status: 0 when every command
// succeeded, 1 when one failed or did not start, 2 for a usage error.
#include <spawnpool/jobserver.h>
#include <spawnpool/memory_budget.h>
#include <spawnpool/pool.h>
#include <spawnpool/session.h>
#include <spawnpool/status.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "installed_package.h"

namespace {

struct Arguments {
  std::size_t jobs = 2;
  std::optional<std::size_t> local_slots;
  std::string commands_file;
  std::string history;
  spawnpool::MemoryBudget memory = spawnpool::MemoryBudget::off();
  std::string status = "auto";
  bool jobserver = true;
  bool same_cpu_handoff = false;
  spawnpool::SessionOptions session;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "build_driver: %s\nusage: build_driver [-j N] [--launcher CMD] "
               "[--compilers LIST] [--local N] [--output=sync] [--trace FILE] [--report FILE] "
               "[--stats] [--memory BUDGET] [--history FILE] [--status MODE] "
               "[--direct-exec yes|no] [--jobserver yes|no] [--same-cpu-handoff yes|no] "
               "COMMANDS_FILE\n",
               problem);
  std::exit(2);
}

bool yes_no(const std::string& option, const std::string& value) {
  if (value == "yes") return true;
  if (value == "no") return false;
  usage((option + " takes yes or no").c_str());
}

std::vector<std::string> comma_separated(const std::string& list) {
  std::vector<std::string> names;
  std::size_t begin = 0;
  for (std::size_t end; begin <= list.size(); begin = end + 1) {
    end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    if (end > begin) names.push_back(list.substr(begin, end - begin));
  }
  return names;
}

Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  args.session.message_prefix = "build_driver";
  bool stats = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    if (arg == "-j") {
      const long jobs = std::strtol(value().c_str(), nullptr, 10);
      if (jobs < 1) usage("-j needs a number of at least 1");
      args.jobs = static_cast<std::size_t>(jobs);
    } else if (arg == "--launcher") {
      args.session.launcher = value();
    } else if (arg == "--local") {
      const long local = std::strtol(value().c_str(), nullptr, 10);
      if (local < 1) usage("--local needs a number of at least 1");
      args.local_slots = static_cast<std::size_t>(local);
    } else if (arg == "--output=sync") {
      args.session.output_sync = true;
    } else if (arg == "--trace") {
      args.session.trace_path = value();
    } else if (arg == "--stats") {
      stats = true;
    } else if (arg == "--memory") {
      const std::optional<spawnpool::MemoryBudget> budget = spawnpool::MemoryBudget::parse(value());
      if (!budget) usage("--memory takes off, auto or a size (4G, 700M)");
      args.memory = *budget;
    } else if (arg == "--history") {
      args.history = value();
    } else if (arg == "--status") {
      args.status = value();
    } else if (arg == "--compilers") {
      args.session.compilers = comma_separated(value());
    } else if (arg == "--report") {
      args.session.report_path = value();
    } else if (arg == "--direct-exec") {
      args.session.direct_exec = yes_no(arg, value());
    } else if (arg == "--jobserver") {
      args.jobserver = yes_no(arg, value());
    } else if (arg == "--same-cpu-handoff") {
      args.same_cpu_handoff = yes_no(arg, value());
    } else if (!arg.empty() && arg[0] == '-') {
      usage(("unknown option " + arg).c_str());
    } else if (args.commands_file.empty()) {
      args.commands_file = arg;
    } else {
      usage("one COMMANDS_FILE only");
    }
  }
  if (args.commands_file.empty()) usage("no COMMANDS_FILE");
  if (stats) args.session.stats_slots = static_cast<int>(args.jobs);
  args.session.trace_process_name = "build_driver";
  return args;
}

// The commands of each stage, in the file's order.
std::vector<std::vector<std::string>> read_stages(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::vector<std::string>> stages(1);
  for (std::string line; std::getline(in, line);) {
    if (line == "---") {
      if (!stages.back().empty()) stages.emplace_back();
    } else if (line.find_first_not_of(" \t") != std::string::npos) {
      stages.back().push_back(line);
    }
  }
  return stages;
}

// The pool's options; the history where the status line (`status_shown`) or memory
// admission reads it, as every front end decides it.
spawnpool::PoolOptions pool_options(const Arguments& args,
                                    std::shared_ptr<spawnpool::Jobserver> jobserver,
                                    bool status_shown) {
  spawnpool::PoolOptions options;
  options.slots = args.jobs;
  options.local_slots = args.local_slots.value_or(
      spawnpool::default_local_slots(args.session.launcher));
  options.jobserver = std::move(jobserver);
  options.memory_budget = args.memory;
  spawnpool::HistoryOptions history;
  history.setting = args.history;
  history.memory = args.memory.enabled();
  history.status_shown = status_shown;
  options.memory_history_path = spawnpool::history_path(history, [](const std::string& warning) {
    std::fprintf(stderr, "build_driver: %s\n", warning.c_str());
  });
  options.same_cpu_handoff = args.same_cpu_handoff;
  example::use_installed_spawner(options);
  return options;
}

// One stage: each driver thread takes the next command and runs it through the whole
// stack; a failing command is its Result, reported and counted, never an exception.
// `unsubmitted` counts the build's commands not yet handed to the stack (the status
// line's total is those plus what the pool has seen).
std::size_t run_all(spawnpool::Session& session, spawnpool::StatusLine& status,
                    const std::vector<std::string>& lines, std::size_t threads,
                    std::atomic<std::size_t>& unsubmitted) {
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failed{0};
  const auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < lines.size();) {
      status.expect(unsubmitted.fetch_sub(1) - 1);
      const spawnpool::Result r = session.run(example::shell_command(lines[i]));
      if (r.started() && r.returncode == 0) continue;
      ++failed;
      if (!r.started())
        status.print(2, "build_driver: not started: " + lines[i] + ": " + r.error_message + "\n");
      else
        status.print(2, "build_driver: failed (exit " + std::to_string(r.returncode) + "): " +
                            lines[i] + "\n");
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  return failed.load();
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args = parse_arguments(argc, argv);
  try {
    const std::vector<std::vector<std::string>> stages = read_stages(args.commands_file);
    // Opened first: the descriptors MAKEFLAGS names may be reused later in the process.
    std::shared_ptr<spawnpool::Jobserver> jobserver;
    if (args.jobserver) jobserver = spawnpool::Jobserver::from_environment();
    if (jobserver) {
      jobserver->keep_from_commands();
      if (!jobserver->usable() && jobserver->claim_warning())
        std::fprintf(stderr, "build_driver: warning: %s\n", jobserver->problem().c_str());
    }
    // The status line reports from the pool and prints every output line whole (it
    // turns output sync on): attached before the pool and the session are made.
    spawnpool::StatusLine status(args.status);
    spawnpool::PoolOptions options = pool_options(args, jobserver, status.shown());
    status.attach(options, args.session);
    spawnpool::Pool pool(options);
    spawnpool::Session session(pool, args.session);
    std::atomic<std::size_t> unsubmitted{0};
    for (const std::vector<std::string>& stage : stages) unsubmitted += stage.size();
    status.begin(".", {args.commands_file});
    std::size_t commands = 0, failed = 0;
    for (const std::vector<std::string>& stage : stages) {
      if (failed) break;  // as make without -k: nothing after a failed stage
      commands += stage.size();
      failed += run_all(session, status, stage, args.jobs, unsubmitted);
    }
    status.expect(0);
    status.finish();
    session.finish();  // the trace closed, the report written (a problem: a warning)
    std::fputs(session.report().c_str(), stdout);
    std::printf("build_driver: %zu commands, %zu failed\n", commands, failed);
    return failed ? 1 : 0;
  } catch (const std::invalid_argument& e) {  // a launcher not a plain command, a bad --status
    std::fprintf(stderr, "build_driver: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // no pool (spawner missing), a file unreadable...
    std::fprintf(stderr, "build_driver: %s\n", e.what());
    return 1;
  }
}
