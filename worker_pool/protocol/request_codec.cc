#include "worker_pool/protocol/request_codec.h"

#include <cerrno>
#include <climits>
#include <cstring>

namespace spawnpool::detail {
namespace {

// The kernel's per-string limit (MAX_ARG_STRLEN, 32 pages), not exported to user space.
constexpr std::uint64_t kMaxArgStrlen = 32 * 4096;

EncodeError error(int error_number, std::string message) {
  return EncodeError{error_number, std::move(message)};
}

// Checks one execve() string; adds its size (with NUL) to `exec_bytes`.
EncodeError check_exec_string(const std::string& s, const char* what, std::size_t index,
                              std::uint64_t& exec_bytes) {
  if (s.find('\0') != std::string::npos)
    return error(EINVAL, std::string(what) + " " + std::to_string(index) +
                             " contains a NUL byte");
  if (s.size() + 1 > kMaxArgStrlen)
    return error(E2BIG, std::string(what) + " " + std::to_string(index) + " is " +
                            std::to_string(s.size()) + " bytes; exec accepts at most " +
                            std::to_string(kMaxArgStrlen - 1) + " per string");
  exec_bytes += s.size() + 1;
  return {};
}

EncodeError check_fields(const RequestFields& f, std::uint64_t arg_max) {
  if (f.argv->empty() || (*f.argv)[0].empty())
    return error(EINVAL, "the command has no program name (empty argv)");
  std::uint64_t exec_bytes = 0;
  for (std::size_t i = 0; i < f.argv->size(); ++i)
    if (auto e = check_exec_string((*f.argv)[i], "argument", i, exec_bytes); e.error_number)
      return e;
  for (std::size_t i = 0; i < f.env->size(); ++i)
    if (auto e = check_exec_string((*f.env)[i], "environment entry", i, exec_bytes);
        e.error_number)
      return e;
  exec_bytes += (f.argv->size() + f.env->size() + 2) * sizeof(char*);
  if (exec_bytes > arg_max)
    return error(E2BIG, "arguments and environment take " + std::to_string(exec_bytes) +
                            " bytes; exec accepts at most " + std::to_string(arg_max));
  if (f.cwd->find('\0') != std::string::npos)
    return error(EINVAL, "the working directory contains a NUL byte");
  if (f.cwd->size() >= PATH_MAX)
    return error(ENAMETOOLONG, "the working directory path is too long");
  return {};
}

void append(char*& cursor, const std::string& s) {
  std::memcpy(cursor, s.c_str(), s.size() + 1);
  cursor += s.size() + 1;
}

}  // namespace

EncodeError encode_request(const RequestFields& fields, std::uint64_t arg_max,
                           std::uint64_t capacity, protocol::RequestHeader* header,
                           char* payload) {
  if (auto e = check_fields(fields, arg_max); e.error_number) return e;
  std::uint64_t size = fields.cwd->size() + 1;
  for (const auto& s : *fields.argv) size += s.size() + 1;
  for (const auto& s : *fields.env) size += s.size() + 1;
  if (size > capacity)
    return error(E2BIG, "the request takes " + std::to_string(size) +
                            " bytes; a slot holds " + std::to_string(capacity));
  char* cursor = payload;
  for (const auto& s : *fields.argv) append(cursor, s);
  for (const auto& s : *fields.env) append(cursor, s);
  append(cursor, *fields.cwd);
  header->flags = fields.flags;
  header->argc = static_cast<std::uint32_t>(fields.argv->size());
  header->envc = static_cast<std::uint32_t>(fields.env->size());
  header->number = fields.number;
  header->payload_size = size;
  return {};
}

bool decode_request(const protocol::RequestHeader& header_in, const char* payload,
                    std::uint64_t capacity, DecodedRequest& out, std::string& why) {
  const protocol::RequestHeader header = header_in;  // one read of every field
  if (header.payload_size == 0 || header.payload_size > capacity) {
    why = "payload size out of range";
    return false;
  }
  if ((header.flags & ~protocol::kKnownRequestFlags) != 0) {
    why = "unknown request flags";
    return false;
  }
  // Every string takes at least one byte, so counts beyond the payload size are bogus.
  const std::uint64_t strings = std::uint64_t{header.argc} + header.envc + 1;
  if (header.argc == 0 || strings > header.payload_size) {
    why = "string counts out of range";
    return false;
  }
  out.storage.assign(payload, payload + header.payload_size);
  if (out.storage.back() != '\0') {
    why = "payload does not end with a NUL";
    return false;
  }
  out.argv.clear();
  out.envp.clear();
  char* cursor = out.storage.data();
  char* const end = cursor + out.storage.size();
  for (std::uint64_t i = 0; i < strings; ++i) {
    if (cursor >= end) {
      why = "fewer strings than announced";
      return false;
    }
    char* s = cursor;
    cursor = static_cast<char*>(std::memchr(cursor, '\0', end - cursor)) + 1;
    if (i < header.argc)
      out.argv.push_back(s);
    else if (i < header.argc + header.envc)
      out.envp.push_back(s);
    else
      out.cwd = *s ? s : nullptr;
  }
  if (cursor != end) {
    why = "trailing bytes after the last string";
    return false;
  }
  if (out.argv[0][0] == '\0') {
    why = "empty program name";
    return false;
  }
  out.argv.push_back(nullptr);
  out.envp.push_back(nullptr);
  out.flags = header.flags;
  out.number = header.number;
  return true;
}

}  // namespace spawnpool::detail
