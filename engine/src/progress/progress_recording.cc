#include "engine/src/progress/progress_recording.h"

#include <cinttypes>
#include <sstream>

namespace spawnpool::detail {

namespace {

constexpr const char* kHeader = "spawnpool-progress-recording 1";

// The exact key a replay files a fallback-only answer under: the snapshot keeps a
// fallback key's record with some command's, and no command of the build has this one.
std::uint64_t fallback_holder(std::uint64_t fallback) { return fallback ^ 0x9e3779b97f4a7c15ULL; }
// The same for an expected output's answer.
std::uint64_t output_holder(std::uint64_t output) { return output ^ 0xc2b2ae3d27d4eb4fULL; }

}  // namespace

ProgressRecorder::ProgressRecorder(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {
  if (file_) std::fprintf(file_, "%s\n", kHeader);
}

ProgressRecorder::~ProgressRecorder() {
  if (file_) std::fclose(file_);
}

void ProgressRecorder::begin(std::int64_t t, std::uint64_t targets_key, const BuildShape* last,
                             const std::vector<std::int64_t>& durations_ns,
                             const std::vector<std::uint64_t>& outputs) {
  if (!file_) return;
  std::fprintf(file_, "B %" PRId64 " %" PRIu64 " %" PRIu64 " %" PRId64 "\n", t, targets_key,
               last ? last->units : 0, last ? last->tail_ns : 0);
  if (!last) return;
  for (std::size_t i = 0; i < last->exact_keys.size(); ++i)
    std::fprintf(file_, "L %" PRIu64 " %" PRId64 " %" PRIu64 "\n", last->exact_keys[i],
                 i < durations_ns.size() ? durations_ns[i] : 0, i < outputs.size() ? outputs[i] : 0);
}

void ProgressRecorder::slots(std::int64_t t, std::size_t slots, bool memory_admission) {
  if (file_) std::fprintf(file_, "P %" PRId64 " %zu %d\n", t, slots, memory_admission ? 1 : 0);
}

void ProgressRecorder::token_waits(std::int64_t t, bool set) {
  if (file_) std::fprintf(file_, "J %" PRId64 " %d\n", t, set ? 1 : 0);
}

void ProgressRecorder::expected(std::int64_t t, std::optional<std::uint64_t> commands) {
  if (!file_) return;
  if (commands)
    std::fprintf(file_, "E %" PRId64 " %" PRIu64 "\n", t, *commands);
  else
    std::fprintf(file_, "E %" PRId64 " -\n", t);
}

void ProgressRecorder::submitted(std::int64_t t, std::uint64_t id, const CommandKey& key,
                                 std::int64_t exact_ns, std::int64_t fallback_ns) {
  if (file_)
    std::fprintf(file_,
                 "S %" PRId64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRIu64 "\n",
                 t, id, key.exact, key.fallback, key.program, exact_ns, fallback_ns, key.output);
}

void ProgressRecorder::started(std::int64_t t, std::uint64_t id) {
  if (file_) std::fprintf(file_, "R %" PRId64 " %" PRIu64 "\n", t, id);
}

void ProgressRecorder::finished(std::int64_t t, std::uint64_t id, bool failed, std::int64_t duration_ns) {
  if (file_)
    std::fprintf(file_, "F %" PRId64 " %" PRIu64 " %d %" PRId64 "\n", t, id, failed ? 1 : 0, duration_ns);
}

void ProgressRecorder::units(std::int64_t t, std::uint64_t units) {
  if (file_) std::fprintf(file_, "N %" PRId64 " %" PRIu64 "\n", t, units);
}

void ProgressRecorder::expected_output(std::int64_t t, std::uint64_t output_key, std::int64_t duration_ns) {
  if (file_) std::fprintf(file_, "O %" PRId64 " %" PRIu64 " %" PRId64 "\n", t, output_key, duration_ns);
}

void ProgressRecorder::finish(std::int64_t t) {
  if (file_) std::fprintf(file_, "X %" PRId64 "\n", t);
}

void ProgressRecorder::end(std::int64_t t) {
  if (!file_) return;
  std::fprintf(file_, "Z %" PRId64 "\n", t);
  std::fclose(file_);
  file_ = nullptr;
}

std::optional<Recording> read_recording(std::istream& in, std::string* error) {
  auto fail = [error](std::size_t line_no, const std::string& why) -> std::optional<Recording> {
    if (error) *error = "line " + std::to_string(line_no) + ": " + why;
    return std::nullopt;
  };
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return fail(1, "not a progress recording");
  Recording rec;
  std::uint64_t shape_key = 0;  // the targets of the B being read; 0: none
  BuildShape shape;
  bool in_shape = false;
  auto close_shape = [&] {
    if (in_shape && shape_key != 0) rec.history.add_build(shape_key, std::move(shape));
    shape = BuildShape{};
    in_shape = false;
  };
  std::optional<std::int64_t> finish_t;
  for (std::size_t line_no = 2; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    RecordedEvent e;
    fields >> e.kind;
    if (e.kind == 'L') {
      std::uint64_t exact = 0;
      std::int64_t duration = 0;
      std::uint64_t output = 0;
      if (!in_shape || !(fields >> exact >> duration)) return fail(line_no, "bad L event");
      if (!(fields >> output)) output = 0;  // an older recording
      shape.exact_keys.push_back(exact);
      if (duration > 0 || output != 0) rec.history.add(exact, 0, {0, duration}, 0, output);
      continue;
    }
    close_shape();
    if (!(fields >> e.t)) return fail(line_no, "no time");
    int flag = 0;
    bool ok = true;
    switch (e.kind) {
      case 'B': {
        std::uint64_t units = 0;
        ok = static_cast<bool>(fields >> e.id >> units);
        e.count = units;
        shape_key = e.id;
        shape.units = units;
        // The last build's tail: absent in recordings made before it was kept (0).
        if (ok && !(fields >> shape.tail_ns)) shape.tail_ns = 0;
        in_shape = true;
        rec.start_ns = e.t;
        break;
      }
      case 'P': ok = static_cast<bool>(fields >> e.id >> flag); break;
      case 'J': ok = static_cast<bool>(fields >> flag); break;
      case 'E': {
        std::string count;
        ok = static_cast<bool>(fields >> count);
        if (ok && count != "-") {
          try {
            e.count = std::stoull(count);
          } catch (const std::exception&) {
            ok = false;
          }
        }
        break;
      }
      case 'S': {
        std::int64_t exact_ns = 0, fallback_ns = 0;
        ok = static_cast<bool>(fields >> e.id >> e.key.exact >> e.key.fallback >> e.key.program >>
                               exact_ns >> fallback_ns);
        if (ok && !(fields >> e.key.output)) e.key.output = 0;  // an older recording
        if (ok && exact_ns > 0) {
          // Its output key stays with the record a last build's L line may have given.
          const HistoryEntry* known = rec.history.find_exact(e.key.exact);
          rec.history.add(e.key.exact, 0, {0, exact_ns}, 0,
                          e.key.output ? e.key.output : known ? known->output_key : 0);
        }
        if (ok && fallback_ns > 0 && e.key.fallback != 0)
          rec.history.add(fallback_holder(e.key.fallback), e.key.fallback, {0, fallback_ns});
        break;
      }
      case 'O':
        ok = static_cast<bool>(fields >> e.id >> e.duration_ns);
        if (ok && e.duration_ns > 0) rec.history.add(output_holder(e.id), 0, {0, e.duration_ns}, 0, e.id);
        break;
      case 'R': ok = static_cast<bool>(fields >> e.id); break;
      case 'F': ok = static_cast<bool>(fields >> e.id >> flag >> e.duration_ns); break;
      case 'N': ok = static_cast<bool>(fields >> e.id); break;
      case 'X': finish_t = e.t; break;
      case 'Z': rec.end_ns = e.t; break;
      default: return fail(line_no, std::string("unknown event '") + e.kind + "'");
    }
    if (!ok) return fail(line_no, std::string("bad ") + e.kind + " event");
    e.flag = flag != 0;
    rec.events.push_back(e);
  }
  close_shape();
  if (rec.events.empty()) return fail(1, "no events");
  if (rec.end_ns == 0) rec.end_ns = finish_t ? *finish_t : rec.events.back().t;
  return rec;
}

}  // namespace spawnpool::detail
