#include "bench/loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace convoy::bench {

double RequestRecord::mean_itl_s() const {
  if (output_tokens < 2 || first_token_s < 0 || token_gaps_s.empty()) return 0;
  return std::accumulate(token_gaps_s.begin(), token_gaps_s.end(), 0.0) /
         static_cast<double>(token_gaps_s.size());
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

LatencySummary Summarize(const std::vector<double>& values) {
  LatencySummary s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.count);
  s.p50 = Percentile(sorted, 50);
  s.p95 = Percentile(sorted, 95);
  s.p99 = Percentile(sorted, 99);
  s.max = sorted.back();
  return s;
}

bool MeetsSlo(const RequestRecord& record, const SloTarget& slo) {
  if (!record.completed || record.first_token_s < 0) return false;
  if (slo.ttft_s > 0 && record.ttft_s() > slo.ttft_s) return false;
  if (slo.itl_s > 0 && record.mean_itl_s() > slo.itl_s) return false;
  return true;
}

bool MeetsSlo(const RequestRecord& record, const SloTargets& slo) {
  return MeetsSlo(record, SloTarget{slo.ttft_s, slo.itl_s});
}

absl::StatusOr<std::map<std::string, SloTarget>> ParseClassSlos(
    const std::vector<std::string>& entries) {
  std::map<std::string, SloTarget> out;
  for (const std::string& entry : entries) {
    const std::vector<std::string> parts = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    std::vector<std::string> targets;
    if (parts.size() == 2) targets = absl::StrSplit(parts[1], '/');
    double ttft_ms = 0, itl_ms = 0;
    if (parts.size() != 2 || parts[0].empty() || targets.size() != 2 ||
        !absl::SimpleAtod(targets[0], &ttft_ms) || !absl::SimpleAtod(targets[1], &itl_ms) ||
        !(ttft_ms >= 0) || !(itl_ms >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "class SLO '", entry,
          "': expected NAME=TTFT_MS/ITL_MS with both numbers 0 or more (0: no target)"));
    }
    if (!out.emplace(parts[0], SloTarget{ttft_ms * 1e-3, itl_ms * 1e-3}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("class SLO '", entry, "': class ", parts[0], " is given twice"));
    }
  }
  return out;
}

std::string UnknownSloClasses(const SloTargets& slo, const std::vector<std::string>& class_names) {
  std::vector<std::string> unknown;
  for (const auto& [name, target] : slo.by_class) {
    if (std::find(class_names.begin(), class_names.end(), name) == class_names.end()) {
      unknown.push_back(name);
    }
  }
  if (unknown.empty()) return "";
  return absl::StrCat("--class-slo names classes the workload does not have (",
                      absl::StrJoin(unknown, ", "),
                      "); its classes are: ", absl::StrJoin(class_names, ", "));
}

bool RefusedForLoad(const RequestRecord& record) {
  return !record.completed &&
         (record.error.rfind("grpc 8:", 0) == 0 || record.error.rfind("http 429", 0) == 0);
}

namespace {

// `targets[r->class_index]` is a record's targets (the last entry for an index out of range).
ClassStats Compute(const std::string& name, const std::vector<const RequestRecord*>& records,
                   double elapsed_s, const std::vector<SloTarget>& targets) {
  ClassStats s;
  s.name = name;
  std::vector<double> ttft, itl, e2e, queue, server_ttft, refusal;
  for (const RequestRecord* r : records) {
    ++s.sent;
    s.output_tokens += r->output_tokens;
    s.output_messages += r->output_messages;
    if (!r->completed) {
      ++s.failed;
      if (r->cancelled_by_client) ++s.cancelled;
      if (RefusedForLoad(*r)) {
        ++s.refused;
        refusal.push_back(r->e2e_s());
      }
      continue;
    }
    ++s.completed;
    s.prompt_tokens += r->prompt_tokens;
    const size_t t = r->class_index >= 0 && static_cast<size_t>(r->class_index) < targets.size()
                         ? static_cast<size_t>(r->class_index)
                         : targets.size() - 1;
    if (MeetsSlo(*r, targets[t])) ++s.met_slo;
    if (r->first_token_s >= 0) ttft.push_back(r->ttft_s());
    itl.insert(itl.end(), r->token_gaps_s.begin(), r->token_gaps_s.end());
    e2e.push_back(r->e2e_s());
    if (r->server_total_us > 0) {
      queue.push_back(static_cast<double>(r->server_queue_us) * 1e-6);
      server_ttft.push_back(static_cast<double>(r->server_ttft_us) * 1e-6);
    }
  }
  s.ttft_s = Summarize(ttft);
  s.itl_s = Summarize(itl);
  s.e2e_s = Summarize(e2e);
  s.server_queue_s = Summarize(queue);
  s.server_ttft_s = Summarize(server_ttft);
  s.refusal_s = Summarize(refusal);
  if (elapsed_s > 0) {
    s.requests_per_s = static_cast<double>(s.completed) / elapsed_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / elapsed_s;
    s.goodput_rps = static_cast<double>(s.met_slo) / elapsed_s;
  }
  return s;
}

}  // namespace

std::vector<ClassStats> ComputeStats(const std::vector<RequestRecord>& records,
                                     const std::vector<std::string>& class_names, double elapsed_s,
                                     const SloTargets& slo) {
  std::vector<std::vector<const RequestRecord*>> by_class(class_names.size());
  std::vector<const RequestRecord*> all;
  for (const RequestRecord& r : records) {
    all.push_back(&r);
    if (r.class_index >= 0 && static_cast<size_t>(r.class_index) < by_class.size()) {
      by_class[r.class_index].push_back(&r);
    }
  }
  // Each class's targets, then the defaults for a record of no known class.
  std::vector<SloTarget> targets;
  for (const std::string& name : class_names) targets.push_back(slo.For(name));
  targets.push_back(SloTarget{slo.ttft_s, slo.itl_s});
  std::vector<ClassStats> out;
  for (size_t i = 0; i < class_names.size(); ++i) {
    out.push_back(Compute(class_names[i], by_class[i], elapsed_s, targets));
  }
  out.push_back(Compute("all", all, elapsed_s, targets));
  return out;
}

}  // namespace convoy::bench
