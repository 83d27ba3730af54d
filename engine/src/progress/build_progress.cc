#include "engine/src/progress/build_progress.h"

#include <algorithm>

#include "engine/src/history/history_store_key.h"
#include "engine/src/progress/eta_estimator.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

constexpr double kNsPerS = 1e9;

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

std::optional<double> learned_duration(const HistorySnapshot& snapshot, const CommandKey& key) {
  const HistoryEntry* entry = snapshot.find_exact(key.exact);
  if (!entry || entry->duration_ns <= 0) entry = snapshot.find_fallback(key.fallback);
  if (!entry || entry->duration_ns <= 0) return std::nullopt;
  return static_cast<double>(entry->duration_ns) / kNsPerS;
}

// `count` of `sorted` (ascending), evenly spread over it (still ascending): the durations
// of the part of the last build that is expected to run again when less than all of it is.
std::vector<double> spread(const std::vector<double>& sorted, std::uint64_t count) {
  if (count >= sorted.size()) return sorted;
  std::vector<double> out;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i)
    out.push_back(sorted[static_cast<std::size_t>((i * 2 + 1) * sorted.size() / (count * 2))]);
  return out;
}

// The estimator's pending work, longest first (eta_estimator.h: then it sorts nothing):
// the queued commands' predictions (a few: the driver submits about as many as there are
// slots), and those still to come (shortest first; `line` keeps their order: it never
// decreases), merged.
std::vector<double> longest_first(std::vector<double> queued, const std::vector<double>& to_come,
                                  const DurationLine& line) {
  std::sort(queued.begin(), queued.end(), std::greater<>());
  std::vector<double> out;
  out.reserve(queued.size() + to_come.size());
  auto next = queued.begin();
  for (auto it = to_come.rbegin(); it != to_come.rend(); ++it) {
    const double predicted = line(*it);
    for (; next != queued.end() && *next > predicted; ++next) out.push_back(*next);
    out.push_back(predicted);
  }
  out.insert(out.end(), next, queued.end());
  return out;
}

}  // namespace

BuildProgress::BuildProgress(std::shared_ptr<HistoryStore> history, std::uint64_t targets_key,
                             std::int64_t start_ns)
    : history_(std::move(history)),
      snapshot_(history_ ? history_->snapshot() : std::make_shared<HistorySnapshot>()) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_locked(targets_key, start_ns);
}

BuildProgress::BuildProgress(HistorySnapshot snapshot, std::uint64_t targets_key,
                             std::int64_t start_ns)
    : snapshot_(std::make_shared<HistorySnapshot>(std::move(snapshot))) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_locked(targets_key, start_ns);
}

void BuildProgress::begin(std::uint64_t targets_key, std::int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_locked(targets_key, now_ns);
  if (recorder_) record_begin();
  changed();
}

void BuildProgress::set_change_listener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  change_listener_ = std::move(listener);
}

void BuildProgress::listen_for_change() { listening_.store(true, std::memory_order_release); }

// On the pool's path of every command: one atomic add, and the listener's call only at
// the first change after it asked (a status line that is idle), not at each.
void BuildProgress::changed() {
  changes_.fetch_add(1, std::memory_order_acq_rel);
  if (listening_.load(std::memory_order_acquire) &&
      listening_.exchange(false, std::memory_order_acq_rel) && change_listener_)
    change_listener_();
}

bool BuildProgress::record_to(const std::string& path, std::function<std::int64_t()> clock) {
  auto recorder = std::make_unique<ProgressRecorder>(path);
  if (!recorder->ok()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  recorder_ = std::move(recorder);
  record_clock_ = clock ? std::move(clock) : [] { return monotonic_ns(); };
  record_begin();
  recorder_->slots(start_ns_, slots_, memory_admission_);
  if (token_waits_) recorder_->token_waits(start_ns_, true);
  if (expected_remaining_) recorder_->expected(start_ns_, expected_remaining_);
  return true;
}

void BuildProgress::end_recording(std::int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!recorder_) return;
  recorder_->end(now_ns);
  recorder_.reset();
}

// The begin as it stands: its time, targets, and the last build's commands with the
// durations the history gives them and the files they write.
void BuildProgress::record_begin() const {
  const BuildShape* last = targets_key_ != 0 ? snapshot_->find_build(targets_key_) : nullptr;
  std::vector<std::int64_t> durations;
  if (last) {
    durations.reserve(last->exact_keys.size());
    for (const std::uint64_t key : last->exact_keys) {
      const HistoryEntry* entry = snapshot_->find_exact(key);
      durations.push_back(entry ? entry->duration_ns : 0);
    }
  }
  // Their output keys: begin_locked() looked them up for these targets already.
  recorder_->begin(start_ns_, targets_key_, last, durations, last_outputs_);
}

void BuildProgress::begin_locked(std::uint64_t targets_key, std::int64_t now_ns) {
  targets_key_ = targets_key;
  start_ns_ = now_ns;
  done_ = failed_ = 0;
  active_.clear();  // a command still running now is never counted (its id is unknown)
  last_durations_.clear();
  last_seen_.clear();
  last_outputs_.clear();
  last_expected_.clear();
  by_duration_.clear();
  unseen_.clear();
  unseen_count_ = 0;
  outputs_.clear();
  output_position_.clear();
  outputs_left_ = 0;
  by_program_.clear();
  timed_ = 0;
  fit_ = DurationFit{};
  busy_s_ = 0;
  first_started_ns_ = 0;
  last_end_ns_ = 0;
  last_tail_s_ = 0;
  ran_.clear();
  units_built_ = 0;
  unit_kinds_.clear();
  last_build_ = {0, 0};
  last_build_kinds_.clear();
  final_.reset();
  if (targets_key_ == 0) return;
  if (const BuildShape* last = snapshot_->find_build(targets_key_)) {
    last_build_ = {last->exact_keys.size(), last->units};
    last_build_kinds_ = last->kinds;
    last_tail_s_ = static_cast<double>(last->tail_ns) / kNsPerS;
    const std::size_t count = last->exact_keys.size();
    last_durations_.reserve(count);
    last_seen_.assign(count, 0);
    for (std::size_t i = count; i-- > 0;) unseen_[last->exact_keys[i]].push_back(static_cast<std::uint32_t>(i));
    last_outputs_.reserve(count);
    last_expected_.assign(count, 0);
    for (const std::uint64_t key : last->exact_keys) {
      const HistoryEntry* entry = snapshot_->find_exact(key);
      last_durations_.push_back(entry && entry->duration_ns > 0 ? static_cast<double>(entry->duration_ns) / kNsPerS : 0);
      last_outputs_.push_back(entry ? entry->output_key : 0);
    }
    for (std::uint32_t i = 0; i < count; ++i)
      if (last_durations_[i] > 0) by_duration_.push_back(i);
    std::stable_sort(by_duration_.begin(), by_duration_.end(),
                     [this](std::uint32_t a, std::uint32_t b) { return last_durations_[a] < last_durations_[b]; });
    unseen_count_ = count;
  }
}

void BuildProgress::set_slots(std::size_t slots, bool memory_admission) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_ = std::max<std::size_t>(slots, 1);
  memory_admission_ = memory_admission;
  if (recorder_) recorder_->slots(record_clock_(), slots_, memory_admission_);
  changed();
}

void BuildProgress::set_token_waits(const void* owner, std::function<std::uint64_t()> waits) {
  std::lock_guard<std::mutex> lock(mutex_);
  token_waits_owner_ = owner;
  token_waits_ = std::move(waits);
  if (recorder_) recorder_->token_waits(record_clock_(), static_cast<bool>(token_waits_));
  changed();
}

void BuildProgress::clear_token_waits(const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (token_waits_owner_ != owner) return;
  token_waits_owner_ = nullptr;
  token_waits_ = nullptr;
  if (recorder_) recorder_->token_waits(record_clock_(), false);
  changed();
}

void BuildProgress::set_units_built(std::uint64_t units) {
  std::lock_guard<std::mutex> lock(mutex_);
  units_built_ = units;
  if (recorder_) recorder_->units(record_clock_(), units);
}

std::pair<std::uint64_t, std::uint64_t> BuildProgress::last_build() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_build_;
}

void BuildProgress::set_unit_kinds(std::string kinds) {
  std::lock_guard<std::mutex> lock(mutex_);
  unit_kinds_ = std::move(kinds);
}

std::string BuildProgress::last_build_kinds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_build_kinds_;
}

void BuildProgress::set_expected_remaining(std::optional<std::uint64_t> commands) {
  std::lock_guard<std::mutex> lock(mutex_);
  // SCons' count says it at each node it evaluates, mostly unchanged.
  if (commands != expected_remaining_) changed();
  expected_remaining_ = commands;
  if (recorder_) recorder_->expected(record_clock_(), commands);
}

void BuildProgress::expect_outputs(const std::vector<std::uint64_t>& output_keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::uint64_t key : output_keys) {
    const HistoryEntry* entry = snapshot_->find_output(key);
    if (recorder_) recorder_->expected_output(record_clock_(), key, entry ? entry->duration_ns : 0);
    if (!entry || entry->duration_ns <= 0 || output_position_.count(key)) continue;
    outputs_.push_back({static_cast<double>(entry->duration_ns) / kNsPerS, key, false});
    output_position_[key] = 0;  // placed below
    ++outputs_left_;
  }
  // Shortest first, as the predictions to come are read (no sort per view).
  std::stable_sort(outputs_.begin(), outputs_.end(),
                   [](const ExpectedOutput& a, const ExpectedOutput& b) { return a.duration_s < b.duration_s; });
  for (std::uint32_t i = 0; i < outputs_.size(); ++i) output_position_[outputs_[i].key] = i;
  for (std::size_t i = 0; i < last_outputs_.size(); ++i)
    if (last_outputs_[i] != 0 && output_position_.count(last_outputs_[i])) last_expected_[i] = 1;
  changed();
}

std::uint64_t BuildProgress::submitted(const CommandKey& key, const std::string& line) {
  Command command;
  command.predicted_s = learned_duration(*snapshot_, key);
  command.program = key.program;
  command.line = line;
  std::lock_guard<std::mutex> lock(mutex_);
  if (const auto it = unseen_.find(key.exact); it != unseen_.end()) {
    last_seen_[it->second.back()] = 1;
    it->second.pop_back();
    if (it->second.empty()) unseen_.erase(it);
    --unseen_count_;
  }
  if (key.output != 0) {
    if (const auto it = output_position_.find(key.output);
        it != output_position_.end() && !outputs_[it->second].seen) {
      outputs_[it->second].seen = true;
      --outputs_left_;
    }
  }
  if (targets_key_ != 0) ran_.push_back(key.exact);
  const std::uint64_t id = next_id_++;
  if (recorder_) record_submitted(id, key);
  active_.emplace(id, std::move(command));
  changed();
  return id;
}

void BuildProgress::started(std::uint64_t id, std::int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (const auto it = active_.find(id); it != active_.end()) {
    it->second.started_ns = std::max<std::int64_t>(now_ns, 1);
    if (first_started_ns_ == 0) first_started_ns_ = it->second.started_ns;
    if (recorder_) recorder_->started(it->second.started_ns, id);
    changed();
  }
}

void BuildProgress::finished(std::uint64_t id, bool failed, std::int64_t duration_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = active_.find(id);
  if (it == active_.end()) return;
  if (recorder_) recorder_->finished(record_clock_(), id, failed, duration_ns);
  if (duration_ns > 0) {
    const double seconds = static_cast<double>(duration_ns) / kNsPerS;
    const std::optional<double> predicted =
        it->second.predicted_s ? it->second.predicted_s : program_median(it->second.program);
    if (predicted && *predicted > 0) {
      fit_.add(*predicted, seconds);
    }
    busy_s_ += seconds;
    if (it->second.started_ns != 0)
      last_end_ns_ = std::max(last_end_ns_, it->second.started_ns + duration_ns);
    by_program_[it->second.program].push_back(seconds);
    ++timed_;
  }
  active_.erase(it);
  ++done_;
  if (failed) ++failed_;
  changed();
}

std::uint64_t BuildProgress::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

// What the history answers for the command's exact and fallback keys, with its keys.
void BuildProgress::record_submitted(std::uint64_t id, const CommandKey& key) const {
  const HistoryEntry* exact = snapshot_->find_exact(key.exact);
  const HistoryEntry* fallback = key.fallback ? snapshot_->find_fallback(key.fallback) : nullptr;
  recorder_->submitted(record_clock_(), id, key, exact ? exact->duration_ns : 0,
                       fallback ? fallback->duration_ns : 0);
}

std::optional<double> BuildProgress::program_median(std::uint64_t program) const {
  const auto it = by_program_.find(program);
  return it == by_program_.end() ? std::nullopt : median(it->second);
}

// A typical command of this build: the mean of those finished (it stands in for commands
// whose durations are summed: their expected duration, above the median of a right-skewed
// mix; the median put through calibration() was 10% below it in the ETA benchmark's
// first builds), else the median of the history's durations of the last build.
std::optional<double> BuildProgress::typical_s() const {
  if (timed_ > 0) return busy_s_ / static_cast<double>(timed_);
  const std::vector<double> unseen = unseen_predictions();
  if (unseen.empty()) return std::nullopt;
  return unseen[unseen.size() / 2];  // the median: they are in order
}

// How this build's commands follow their predictions (duration_fit.h), once a few rounds
// of the slots have finished (before that, one slow start would say too much); until
// then, as predicted.
DurationLine BuildProgress::calibration() const {
  if (fit_.count() < std::max<std::uint64_t>(4, 2 * slots_)) return {};
  return fit_.line();
}

// How much longer the rest takes than its commands' durations placed on the slots: the
// inverse of the share of the slots' time the commands kept busy since the first
// started. The driver's own work between commands (SCons: the Taskmaster, signatures,
// the up-to-date nodes of an incremental build, a quarter of its time and more) leaves
// a slot idle, and as long again in the rest of the build: in the ETA benchmark's
// recorded builds (bench_projects/eta_bench.py), the wall time per command second so far
// was that of the rest within 2-3% (median) in clean builds and 5-7% in incremental ones,
// while the machine's load changed by 2x. Not the idle share
// where admission holds commands back (memory, make's tokens): the ETA's parallelism
// follows that already. From the same point as calibration(); the share within
// 0.25-1 (4x at most).
double BuildProgress::pace(std::int64_t now_ns, double running_s) const {
  if (fit_.count() < std::max<std::uint64_t>(4, 2 * slots_)) return 1;
  const double window_s = static_cast<double>(now_ns - first_started_ns_) / kNsPerS;
  if (memory_admission_ || token_waits_ || first_started_ns_ == 0 || window_s <= 0) return 1;
  return 1 / std::clamp((busy_s_ + running_s) / (window_s * static_cast<double>(slots_)), 0.25, 1.0);
}

// What the driver will still take after its last command ends: the last build's tail
// (BuildProgress::finish measures it), scaled as its commands are (the history's over
// this build's: a load that slows the commands slows the driver too), less what has
// passed of it once no command is left.
double BuildProgress::tail_s(std::int64_t now_ns, std::uint64_t to_come, const DurationLine& line) const {
  double tail = last_tail_s_ * line.ratio;
  if (active_.empty() && to_come == 0 && last_end_ns_ != 0)
    tail -= static_cast<double>(now_ns - last_end_ns_) / kNsPerS;
  return std::max(tail, 0.0);
}

// The learned durations of the last build's commands not seen in this one (nor among the
// expected outputs, which predict those commands themselves), from its
// position `from` on, shortest first. A walk of by_duration_: each view takes them, and
// sorting them at each view was a quarter of its cost (the 600-source tree's clean
// rebuild under callgrind: 88k instructions a view, about 21k of them that sort).
std::vector<double> BuildProgress::unseen_predictions(std::size_t from) const {
  std::vector<double> out;
  out.reserve(by_duration_.size());
  for (const std::uint32_t i : by_duration_)
    if (i >= from && !last_seen_[i] && !last_expected_[i]) out.push_back(last_durations_[i]);
  return out;
}

// What the `to_come` commands not submitted yet are predicted to take. First the files
// the driver expects them to write that the history knows (expect_outputs): each one's
// own last duration, as Ninja knows its plan's commands. For the rest, those of the last
// build not seen in this one, from the point of the last build this one has reached (as
// far into its commands as this build is into its own), evenly spread over their
// durations. A build runs its kinds of commands in the same order each time (SCons: a
// library's objects, then its archive; the programs last), while the last build's
// commands this one will never run (an incremental build's compiles of other sources)
// lie all along it: over the whole of it, an incremental build's archives and links to
// come were predicted as the compiles they are outnumbered by, 17-19% short at 75% of
// the ETA benchmark's incremental builds; from the point reached, within 4%. All of them
// when the rest of the last build has fewer than are to come. Shortest first.
std::vector<double> BuildProgress::expected_predictions(std::uint64_t to_come) const {
  if (to_come == 0) return {};
  std::vector<double> known = expected_outputs();
  if (known.size() >= to_come) return spread(known, to_come);
  const std::uint64_t others = to_come - known.size();
  const double submitted = static_cast<double>(done_ + active_.size());
  const double reached = submitted / (submitted + static_cast<double>(to_come));
  std::vector<double> rest =
      unseen_predictions(static_cast<std::size_t>(reached * static_cast<double>(last_durations_.size())));
  if (rest.size() < others) rest = unseen_predictions();
  if (rest.size() > others) rest = spread(rest, others);
  if (known.empty()) return rest;
  std::vector<double> both(known.size() + rest.size());
  std::merge(known.begin(), known.end(), rest.begin(), rest.end(), both.begin());
  return both;
}

// The durations of the expected outputs no command has written yet, shortest first.
std::vector<double> BuildProgress::expected_outputs() const {
  std::vector<double> out;
  out.reserve(outputs_left_);
  for (const ExpectedOutput& output : outputs_)
    if (!output.seen) out.push_back(output.duration_s);
  return out;
}

StatusView BuildProgress::view(std::int64_t now_ns) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (final_) return *final_;
  StatusView view;
  view.done = done_;
  view.elapsed_s = static_cast<double>(now_ns - start_ns_) / kNsPerS;
  EtaInput eta;
  std::uint64_t queued = 0;
  std::int64_t longest_start = 0;
  // Every prediction goes through this build's line (calibration()): the queued and
  // running commands', and the last build's for the commands still to come (not the
  // typical duration once commands have finished: that is this build's own).
  const DurationLine line = calibration();
  for (const auto& [id, command] : active_) {
    std::optional<double> predicted = command.predicted_s;
    if (!predicted) predicted = program_median(command.program);
    if (predicted) *predicted = line(*predicted);
    if (command.started_ns == 0) {
      ++queued;
      if (predicted)
        eta.pending_s.push_back(*predicted);
      else
        ++eta.pending_unknown;
      continue;
    }
    eta.running.push_back({static_cast<double>(now_ns - command.started_ns) / kNsPerS, predicted});
    if (longest_start == 0 || command.started_ns < longest_start) {
      longest_start = command.started_ns;
      view.longest_running = command.line;
    }
  }
  view.running = eta.running.size();
  if (longest_start != 0) view.longest_running_s = static_cast<double>(now_ns - longest_start) / kNsPerS;
  // The scheduler says which queued jobs wait for make's token; another job queued while
  // a slot is free is held by memory admission (the scheduler starts any other at once).
  if (token_waits_) view.waiting_for_token = std::min<std::uint64_t>(token_waits_(), queued);
  if (memory_admission_ && queued > view.waiting_for_token && view.running < slots_)
    view.waiting_for_memory = queued - view.waiting_for_token;

  const std::uint64_t to_come = expected_remaining_ ? *expected_remaining_ : unseen_count_;
  const std::vector<double> expected = expected_predictions(to_come);
  eta.pending_unknown += to_come - expected.size();
  eta.pending_s = longest_first(std::move(eta.pending_s), expected, line);
  view.total = done_ + active_.size() + to_come;

  // Admission keeps the build as narrow as it runs now (make's other jobs hold the
  // tokens, or memory is short).
  eta.parallelism = view.waiting_for_memory || view.waiting_for_token
                        ? std::max<std::size_t>(view.running, 1)
                        : slots_;
  eta.typical_s = typical_s();
  if (eta.typical_s && timed_ == 0) *eta.typical_s = line(*eta.typical_s);
  double running_s = 0;
  for (const RunningWork& work : eta.running) running_s += work.elapsed_s;
  eta.pace = pace(now_ns, running_s);
  eta.tail_s = tail_s(now_ns, to_come, line);
  // Nothing finished and nothing predicted: no number, not even 0:00.
  const bool known = eta.typical_s || !eta.pending_s.empty() ||
                     std::any_of(eta.running.begin(), eta.running.end(),
                                 [](const RunningWork& w) { return w.predicted_s.has_value(); });
  // The estimate reads `eta` alone: the pool's threads, which take the lock at each
  // command's submission, start and end, need not wait for it (half a view's work).
  lock.unlock();
  if (known) view.remaining_s = estimate_remaining_s(eta);
  return view;
}

StatusView BuildProgress::finish(std::int64_t now_ns) {
  StatusView last = view(now_ns);
  std::lock_guard<std::mutex> lock(mutex_);
  if (final_) return *final_;
  last.total = last.done;
  last.remaining_s = 0;
  last.running = last.waiting_for_memory = last.waiting_for_token = 0;
  last.longest_running.clear();
  final_ = last;
  if (recorder_) recorder_->finish(now_ns);
  // The tail: the driver's time from its last command's end to here (none: unknown).
  const std::int64_t tail_ns = last_end_ns_ != 0 ? std::max<std::int64_t>(now_ns - last_end_ns_, 0) : 0;
  if (history_ && targets_key_ != 0)
    history_->record_build(targets_key_, BuildShape{ran_, units_built_, unit_kinds_, tail_ns});
  return last;
}

std::uint64_t hash_targets(const std::string& top_dir, std::vector<std::string> targets) {
  std::sort(targets.begin(), targets.end());
  std::string text = top_dir;
  for (const std::string& target : targets) text += '\0' + target;
  const std::uint64_t key = hash_bytes(text.data(), text.size(), 0x7461726765747321ULL);
  return key == 0 ? 1 : key;
}

}  // namespace spawnpool::detail
