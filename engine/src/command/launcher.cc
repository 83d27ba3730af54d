#include "engine/src/command/launcher.h"

#include <stdexcept>

#include "engine/src/command/prepare_command.h"
#include "engine/src/command/shell_invocation.h"
#include "engine/src/command/shell_words.h"
#include "worker_pool/spawner/path_search.h"

namespace spawnpool::detail {
namespace {

// distcc's own exit codes (distcc(1) "EXIT CODES"); anything else is the compiler's.
const char* distcc_failure(int status) {
  switch (status) {
    case 100: return "failed";
    case 101: return "got bad arguments";
    case 102: return "could not bind";
    case 103: return "could not connect";
    case 104: return "saw the compiler crash";
    case 105: return "ran out of memory";
    case 106: return "got a bad host specification (DISTCC_HOSTS)";
    case 107: return "had an I/O error";
    case 108: return "got a truncated reply";
    case 109: return "had a protocol error";
    case 110: return "did not find the compiler on the remote host";
    case 111: return "was called recursively";
    case 112: return "could not discard privileges";
    case 113: return "was denied network access";
    case 114: return "found its host busy";
    case 115: return "found no such file";
    case 116: return "failed to distribute";
    case 118: return "timed out";
    case 119: return "had a GSS-API error";
    case 120: return "was called for preprocessing";
    default: return nullptr;
  }
}

// Driver variables a launcher needs even when the command's own environment lacks them.
bool is_launcher_variable(std::string_view name) {
  if (name == "HOME") return true;
  for (std::string_view prefix : {"DISTCC_", "CCACHE_", "ICECC_", "SCCACHE_"})
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

std::vector<std::string> launcher_words(std::string_view command) {
  std::vector<ShellToken> tokens = shell_tokens(command);
  for (const ShellToken& token : tokens)
    if (token.kind != ShellToken::kWord)
      throw std::invalid_argument("not a launcher command (shell syntax)");
  if (tokens.empty()) throw std::invalid_argument("empty launcher");
  return word_texts(std::move(tokens));
}

std::string on_path(const std::string& program, const std::vector<std::string>& env) {
  std::vector<char*> envp;
  for (const std::string& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);
  int error_number = 0;
  return search_path(program.c_str(), envp.data(), nullptr, error_number);
}

}  // namespace

Launcher::Launcher(std::string_view command, const std::vector<std::string>& driver_environment)
    : words_(launcher_words(command)) {
  name_ = file_name(words_[0]);
  const std::string resolved = on_path(words_[0], driver_environment);
  found_ = !resolved.empty();
  if (found_) words_[0] = resolved;
  for (std::size_t i = 0; i < words_.size(); ++i) {
    if (i > 0) prefix_ += ' ';
    prefix_ += shell_quote(words_[i]);
    if (file_name(words_[i]) == "distcc") is_distcc_ = true;
  }
  for (const std::string& entry : driver_environment) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (name.size() < entry.size() && is_launcher_variable(name))
      driver_env_.emplace_back(std::string(name), entry);
  }
}

void Launcher::add_environment(std::vector<std::string>& env) const {
  for (const auto& [name, entry] : driver_env_)
    if (environment_index(env, name) == env.size()) env.push_back(entry);
}

bool Launcher::ran_locally(std::string_view output) const {
  return is_distcc_ && (output.find("running locally instead") != std::string_view::npos ||
                        output.find("retrying locally") != std::string_view::npos);
}

std::string Launcher::failure(int status) const {
  const std::string exit = " (exit " + std::to_string(status) + ")";
  if ((status == 126 || status == 127) && !found_) return name_ + " was not found on PATH" + exit;
  if (status == 126) return name_ + " could not be executed" + exit;
  if (const char* what = is_distcc_ ? distcc_failure(status) : nullptr)
    return name_ + " " + what + exit;
  return {};
}

}  // namespace spawnpool::detail
