// A miniature build driver on spawnpool: submits a handful of commands at once, collects
// each result as data (exit status, captured output, CPU time, timings), and reports them
// in submission order. Single-threaded: submit() hands commands to free slots and wait()
// collects them; a real driver would submit from its scheduler and wait from workers.
#include <spawnpool/pool.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "installed_package.h"

namespace {

spawnpool::PoolOptions pool_options() {
  spawnpool::PoolOptions options;
  options.slots = 2;
  example::use_installed_spawner(options);
  return options;
}

spawnpool::Command shell(const std::string& line) {
  spawnpool::Command command = example::shell_command(line);
  command.output = spawnpool::OutputMode::kCapture;
  return command;
}

// One line per output stream, with the newline shown, so the report stays one line each.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out + "\"";
}

void report(const std::string& what, const spawnpool::Result& r) {
  if (!r.started()) {
    // Never an exit code: the stage and errno say why nothing ran.
    std::printf("%s: not started (stage %s, errno %d): %s\n", what.c_str(),
                spawnpool::stage_name(r.failure), r.error_number, r.error_message.c_str());
    return;
  }
  std::printf("%s: exit %d, stdout %s, stderr %s\n", what.c_str(), r.returncode,
              quoted(r.stdout_data).c_str(), quoted(r.stderr_data).c_str());
  std::printf("  slot %d, wall %.3f ms, user %.3f ms, max rss %ld KiB, queue %.3f ms\n", r.slot,
              r.wall_time * 1e3, r.user_time * 1e3, r.max_rss_kb,
              static_cast<double>(r.dispatched_ns - r.submitted_ns) / 1e6);
}

}  // namespace

int main() {
  try {
    const spawnpool::PoolOptions options = pool_options();
    spawnpool::Pool pool(options);
    std::printf("pool: %zu slots, spawner %s\n", pool.slots(),
                options.spawner_path.empty() ? "(default)" : options.spawner_path.c_str());

    const std::vector<std::string> lines = {
        "echo compiling a.c",
        "echo 'warning: b.c' >&2; echo compiled b.c",
        "exit 3",
        "sleep 0.1; echo slow done",
    };
    // More commands than slots: submit() waits for a free slot, so collect the oldest
    // job before submitting past the slot count.
    std::vector<spawnpool::Job> jobs;
    std::vector<spawnpool::Result> results(lines.size());
    std::size_t next_wait = 0;
    for (const std::string& line : lines) {
      if (jobs.size() - next_wait == pool.slots()) {
        results[next_wait] = pool.wait(jobs[next_wait]);
        ++next_wait;
      }
      jobs.push_back(pool.submit(shell(line)));
    }
    for (; next_wait < jobs.size(); ++next_wait) results[next_wait] = pool.wait(jobs[next_wait]);
    for (std::size_t i = 0; i < lines.size(); ++i) report(lines[i], results[i]);

    // A program that does not exist: a launch failure is data, not an exception.
    spawnpool::Command missing;
    missing.argv = {"no-such-program-for-the-example"};
    report("no-such-program-for-the-example", pool.run(missing));

    // Output passed straight through to this process's stdout.
    std::fflush(stdout);
    spawnpool::Command hello;
    hello.argv = {"echo", "passthrough: hello from a spawner"};
    const spawnpool::Result r = pool.run(hello);
    std::printf("passthrough: exit %d\n", r.returncode);
    return 0;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "mini_driver: cannot start the pool: %s\n", e.what());
    return 1;
  }
}
