#include "bench/loadgen/trace.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace convoy::bench {
namespace {

// The integer field `name` of `line`, at least `min`.
absl::StatusOr<int32_t> IntField(const nlohmann::json& line, const char* name, int32_t min,
                                 const std::string& where) {
  auto it = line.find(name);
  if (it == line.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": no ", name));
  if (!it->is_number_integer() || it->get<int64_t>() < min ||
      it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", name, " must be an integer of at least ", min, ", not ", it->dump()));
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

}  // namespace

absl::StatusOr<Trace> ParseTrace(absl::string_view text, absl::string_view source) {
  Trace trace;
  trace.source = std::string(source);
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view stripped = absl::StripAsciiWhitespace(raw);
    if (stripped.empty()) continue;
    const std::string where = absl::StrCat(source, ":", line_number);
    const nlohmann::json line =
        nlohmann::json::parse(stripped, nullptr, /*allow_exceptions=*/false);
    if (!line.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
    }
    TraceEntry entry;
    auto arrival = line.find("arrival_s");
    if (arrival == line.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no arrival_s"));
    }
    if (!arrival->is_number() || !(arrival->get<double>() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": arrival_s must be a number of seconds >= 0, not ", arrival->dump()));
    }
    entry.arrival_s = arrival->get<double>();
    absl::StatusOr<int32_t> prompt = IntField(line, "prompt_tokens", 1, where);
    if (!prompt.ok()) return prompt.status();
    absl::StatusOr<int32_t> output = IntField(line, "output_tokens", 0, where);
    if (!output.ok()) return output.status();
    absl::StatusOr<int32_t> priority = IntField(line, "priority", 0, where);
    if (!priority.ok()) return priority.status();
    entry.prompt_tokens = *prompt;
    entry.output_tokens = std::max(*output, 1);
    entry.priority = *priority;
    trace.entries.push_back(entry);
  }
  if (trace.entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the trace has no request"));
  }
  std::stable_sort(
      trace.entries.begin(), trace.entries.end(),
      [](const TraceEntry& a, const TraceEntry& b) { return a.arrival_s < b.arrival_s; });
  const double first = trace.entries.front().arrival_s;
  for (TraceEntry& e : trace.entries) {
    e.arrival_s -= first;
    trace.priorities.push_back(e.priority);
  }
  std::sort(trace.priorities.begin(), trace.priorities.end());
  trace.priorities.erase(std::unique(trace.priorities.begin(), trace.priorities.end()),
                         trace.priorities.end());
  for (TraceEntry& e : trace.entries) {
    e.class_index = static_cast<int>(
        std::lower_bound(trace.priorities.begin(), trace.priorities.end(), e.priority) -
        trace.priorities.begin());
  }
  return trace;
}

absl::StatusOr<Trace> LoadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the trace ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseTrace(text.str(), path);
}

v1::Workload TraceWorkload(const Trace& trace, double rate_scale) {
  v1::Workload workload;
  workload.set_name(absl::StrCat("trace ", trace.source));
  workload.set_num_requests(static_cast<int32_t>(trace.entries.size()));
  const double span = trace.span_s();
  v1::OpenLoop* open = workload.mutable_arrival()->mutable_open_loop();
  open->set_pattern(v1::OpenLoop::POISSON);
  open->set_rate_rps(span > 0 ? static_cast<double>(trace.entries.size()) / span * rate_scale
                              : static_cast<double>(trace.entries.size()));
  for (int32_t priority : trace.priorities) {
    v1::RequestClass* c = workload.add_request_class();
    c->set_name(priority == 0 ? "default priority" : absl::StrCat("priority ", priority));
    c->set_priority(priority);
    c->set_weight(0);
    c->mutable_prompt_tokens()->mutable_uniform()->set_min(std::numeric_limits<int32_t>::max());
    c->mutable_output_tokens()->mutable_uniform()->set_min(std::numeric_limits<int32_t>::max());
  }
  for (const TraceEntry& e : trace.entries) {
    v1::RequestClass* c = workload.mutable_request_class(e.class_index);
    c->set_weight(c->weight() + 1);
    for (auto [d, n] : {std::pair{c->mutable_prompt_tokens(), e.prompt_tokens},
                        std::pair{c->mutable_output_tokens(), e.output_tokens}}) {
      d->mutable_uniform()->set_min(std::min(d->uniform().min(), n));
      d->mutable_uniform()->set_max(std::max(d->uniform().max(), n));
    }
  }
  return workload;
}

TraceReplay::TraceReplay(const Trace& trace, double rate_scale, int64_t vocab_size,
                         int64_t max_context, uint64_t seed)
    : trace_(trace),
      rate_scale_(rate_scale),
      vocab_size_(vocab_size),
      max_context_(max_context),
      rng_(seed) {}

PlannedRequest TraceReplay::Next() {
  const TraceEntry& e = trace_.entries[next_];
  PlannedRequest r;
  r.index = static_cast<int64_t>(next_++);
  r.class_index = e.class_index;
  r.priority = e.priority;
  r.sampling_seed = rng_.Next();
  int64_t output = std::min<int64_t>(e.output_tokens, max_context_ - 1);
  const int64_t prompt = std::min<int64_t>(e.prompt_tokens, max_context_ - output);
  r.max_tokens = static_cast<int32_t>(output);
  r.prompt_token_ids.resize(static_cast<size_t>(prompt));
  for (int32_t& id : r.prompt_token_ids) {
    id = static_cast<int32_t>(rng_.UniformInt(0, vocab_size_ - 1));
  }
  return r;
}

}  // namespace convoy::bench
