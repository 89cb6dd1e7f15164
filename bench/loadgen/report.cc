#include "bench/loadgen/report.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace convoy::bench {
namespace {

// Milliseconds, or "-" when there were no samples.
std::string Ms(const LatencySummary& s, double value) {
  if (s.count == 0 || std::isnan(value)) return "-";
  return absl::StrFormat("%.1f", value * 1e3);
}

std::string Offered(const RunResult& run) {
  if (run.offered_rps > 0) return absl::StrFormat("%g/s", run.offered_rps);
  if (run.concurrency > 0) return absl::StrFormat("c=%d", run.concurrency);
  return "-";
}

nlohmann::json SummaryJson(const LatencySummary& s) {
  if (s.count == 0) return {{"count", 0}};
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50},
          {"p95", s.p95},     {"p99", s.p99},   {"max", s.max}};
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

std::string CsvNumber(const LatencySummary& s, double value) {
  if (s.count == 0 || std::isnan(value)) return "";
  return absl::StrFormat("%.6g", value * 1e3);
}

// "cold start 3.2 s | peak RSS 812 MiB | peak KV 41% (310 blocks) | $0.0123 per 1,000 requests",
// of what was measured; empty when nothing was.
std::string ServerLine(const RunResult& run) {
  std::vector<std::string> parts;
  if (run.cold_start_s >= 0)
    parts.push_back(absl::StrFormat("cold start %.2f s", run.cold_start_s));
  if (run.memory.peak_resident_bytes >= 0) {
    parts.push_back(absl::StrFormat("peak RSS %.0f MiB", run.memory.peak_resident_bytes / 1048576));
  }
  if (run.memory.peak_kv_usage >= 0) {
    parts.push_back(absl::StrFormat("peak KV %.1f%% (%.0f blocks)", run.memory.peak_kv_usage * 100,
                                    run.memory.peak_kv_blocks_used));
  }
  if (const double cost = CostPer1000Requests(run); !std::isnan(cost)) {
    parts.push_back(
        absl::StrFormat("%.4g per 1,000 requests at %g/hour", cost, run.price_per_hour));
  }
  if (parts.empty()) return "";
  return absl::StrCat("server: ", absl::StrJoin(parts, " | "), "\n");
}

// A number, or null when it is NaN or negative (not measured).
nlohmann::json Measured(double value) {
  if (std::isnan(value) || value < 0) return nullptr;
  return value;
}

}  // namespace

double ErrorRate(const ClassStats& c) {
  return c.sent > 0 ? static_cast<double>(c.failed) / static_cast<double>(c.sent) : 0;
}

double ColdStartSeconds(absl::Time started, absl::Time first_answer) {
  if (first_answer == absl::InfiniteFuture()) return -1;
  return absl::ToDoubleSeconds(first_answer - started);
}

double CostPer1000Requests(const RunResult& run) {
  const ClassStats* all = run.all();
  if (run.price_per_hour <= 0 || all == nullptr || all->completed == 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return run.price_per_hour * (run.elapsed_s / 3600) / static_cast<double>(all->completed) * 1000;
}

// "TTFT <= 500 ms, mean ITL <= -" for one class's targets.
std::string SloText(const SloTarget& t) {
  return absl::StrFormat("TTFT <= %s, mean ITL <= %s",
                         t.ttft_s > 0 ? absl::StrFormat("%g ms", t.ttft_s * 1e3) : "-",
                         t.itl_s > 0 ? absl::StrFormat("%g ms", t.itl_s * 1e3) : "-");
}

std::string FormatClassTable(const RunResult& run) {
  std::string out =
      absl::StrFormat("config: %s | %s | %.1f s | SLO: %s", run.config, run.arrival, run.elapsed_s,
                      SloText(SloTarget{run.slo.ttft_s, run.slo.itl_s}));
  for (const auto& [name, target] : run.slo.by_class) {
    absl::StrAppend(&out, "; ", name, ": ", SloText(target));
  }
  out += "\n";
  absl::StrAppendFormat(&out, "%-12s %6s %5s | %-20s | %-20s | %-20s | %7s %9s %8s %5s %5s\n",
                        "class", "done", "fail", "TTFT ms p50/p95/p99", "ITL ms p50/p95/p99",
                        "E2E ms p50/p95/p99", "req/s", "out tok/s", "goodput", "SLO%", "err%");
  for (const ClassStats& c : run.classes) {
    auto triple = [](const LatencySummary& s) {
      return absl::StrCat(Ms(s, s.p50), "/", Ms(s, s.p95), "/", Ms(s, s.p99));
    };
    const double attained =
        c.completed > 0 ? 100.0 * static_cast<double>(c.met_slo) / static_cast<double>(c.sent)
                        : 0.0;
    absl::StrAppendFormat(
        &out, "%-12s %6d %5d | %-20s | %-20s | %-20s | %7.2f %9.1f %8.2f %5.1f %5.1f\n", c.name,
        c.completed, c.failed, triple(c.ttft_s), triple(c.itl_s), triple(c.e2e_s), c.requests_per_s,
        c.output_tokens_per_s, c.goodput_rps, attained, 100 * ErrorRate(c));
  }
  absl::StrAppend(&out, ServerLine(run));
  if (!run.error.empty()) absl::StrAppend(&out, "error: ", run.error, "\n");
  return out;
}

int BestGoodput(const std::vector<RunResult>& runs) {
  int best = -1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ClassStats* a = runs[i].all();
    if (!runs[i].error.empty() || a == nullptr) continue;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const ClassStats* b = runs[best].all();
    if (a->goodput_rps > b->goodput_rps ||
        (a->goodput_rps == b->goodput_rps && a->output_tokens_per_s > b->output_tokens_per_s)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

std::string FormatFrontierTable(const std::vector<RunResult>& runs) {
  const int best = BestGoodput(runs);
  size_t width = 6;
  for (const RunResult& r : runs) width = std::max(width, r.config.size());
  std::string out =
      absl::StrFormat("  %-*s %8s %7s %9s %8s %5s | %8s %8s | %7s %7s | %8s\n",
                      static_cast<int>(width), "config", "offered", "req/s", "out tok/s", "goodput",
                      "SLO%", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "E2E p99");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    const ClassStats* a = r.all();
    const char* mark = static_cast<int>(i) == best ? "*" : " ";
    if (!r.error.empty() || a == nullptr) {
      absl::StrAppendFormat(&out, "%s %-*s %8s  failed: %s\n", mark, static_cast<int>(width),
                            r.config, Offered(r), r.error);
      continue;
    }
    const double attained =
        a->sent > 0 ? 100.0 * static_cast<double>(a->met_slo) / static_cast<double>(a->sent) : 0;
    absl::StrAppendFormat(
        &out, "%s %-*s %8s %7.2f %9.1f %8.2f %5.1f | %8s %8s | %7s %7s | %8s\n", mark,
        static_cast<int>(width), r.config, Offered(r), a->requests_per_s, a->output_tokens_per_s,
        a->goodput_rps, attained, Ms(a->ttft_s, a->ttft_s.p50), Ms(a->ttft_s, a->ttft_s.p99),
        Ms(a->itl_s, a->itl_s.p50), Ms(a->itl_s, a->itl_s.p99), Ms(a->e2e_s, a->e2e_s.p99));
  }
  if (best >= 0) {
    absl::StrAppendFormat(&out, "* best goodput: %s (%.2f req/s within the SLO)\n",
                          runs[best].config, runs[best].all()->goodput_rps);
  }
  return out;
}

std::string FormatFrontierMarkdown(const std::vector<RunResult>& runs) {
  const int best = BestGoodput(runs);
  std::string out =
      "| config | offered | req/s | output tok/s | goodput req/s | SLO met | TTFT p50 ms | "
      "TTFT p99 ms | ITL p50 ms | ITL p99 ms | E2E p99 ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    const ClassStats* a = r.all();
    const std::string name =
        static_cast<int>(i) == best ? absl::StrCat("**", r.config, "** (best)") : r.config;
    if (!r.error.empty() || a == nullptr) {
      absl::StrAppendFormat(&out, "| %s | %s | failed: %s |||||||||\n", name, Offered(r), r.error);
      continue;
    }
    const double attained =
        a->sent > 0 ? 100.0 * static_cast<double>(a->met_slo) / static_cast<double>(a->sent) : 0;
    absl::StrAppendFormat(
        &out, "| %s | %s | %.2f | %.1f | %.2f | %.0f%% | %s | %s | %s | %s | %s |\n", name,
        Offered(r), a->requests_per_s, a->output_tokens_per_s, a->goodput_rps, attained,
        Ms(a->ttft_s, a->ttft_s.p50), Ms(a->ttft_s, a->ttft_s.p99), Ms(a->itl_s, a->itl_s.p50),
        Ms(a->itl_s, a->itl_s.p99), Ms(a->e2e_s, a->e2e_s.p99));
  }
  return out;
}

nlohmann::json RunToJson(const RunResult& run) {
  nlohmann::json j = {{"config", run.config},
                      {"protocol", run.protocol},
                      {"arrival", run.arrival},
                      {"offered_rps", run.offered_rps},
                      {"concurrency", run.concurrency},
                      {"elapsed_s", run.elapsed_s},
                      {"slo", {{"ttft_s", run.slo.ttft_s}, {"itl_s", run.slo.itl_s}}}};
  if (!run.slo.by_class.empty()) {
    nlohmann::json by_class = nlohmann::json::object();
    for (const auto& [name, target] : run.slo.by_class) {
      by_class[name] = {{"ttft_s", target.ttft_s}, {"itl_s", target.itl_s}};
    }
    j["slo"]["by_class"] = by_class;
  }
  if (!run.error.empty()) j["error"] = run.error;
  j["cold_start_s"] = Measured(run.cold_start_s);
  j["server_memory"] = {{"samples", run.memory.samples},
                        {"peak_resident_bytes", Measured(run.memory.peak_resident_bytes)},
                        {"peak_kv_usage", Measured(run.memory.peak_kv_usage)},
                        {"peak_kv_blocks_used", Measured(run.memory.peak_kv_blocks_used)}};
  j["price_per_hour"] = run.price_per_hour;
  j["cost_per_1000_requests"] = Measured(CostPer1000Requests(run));
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassStats& c : run.classes) {
    classes.push_back({{"name", c.name},
                       {"sent", c.sent},
                       {"completed", c.completed},
                       {"failed", c.failed},
                       {"error_rate", ErrorRate(c)},
                       {"refused", c.refused},
                       {"refusal_s", SummaryJson(c.refusal_s)},
                       {"cancelled", c.cancelled},
                       {"met_slo", c.met_slo},
                       {"prompt_tokens", c.prompt_tokens},
                       {"output_tokens", c.output_tokens},
                       {"output_messages", c.output_messages},
                       {"requests_per_s", c.requests_per_s},
                       {"output_tokens_per_s", c.output_tokens_per_s},
                       {"goodput_rps", c.goodput_rps},
                       {"ttft_s", SummaryJson(c.ttft_s)},
                       {"itl_s", SummaryJson(c.itl_s)},
                       {"e2e_s", SummaryJson(c.e2e_s)},
                       {"server_queue_s", SummaryJson(c.server_queue_s)},
                       {"server_ttft_s", SummaryJson(c.server_ttft_s)}});
  }
  j["classes"] = std::move(classes);
  return j;
}

nlohmann::json SweepToJson(const std::vector<RunResult>& runs) {
  nlohmann::json j;
  j["runs"] = nlohmann::json::array();
  for (const RunResult& r : runs) j["runs"].push_back(RunToJson(r));
  const int best = BestGoodput(runs);
  j["best"] = best >= 0 ? nlohmann::json(best) : nlohmann::json(nullptr);
  return j;
}

std::string FormatCsv(const std::vector<RunResult>& runs) {
  std::string out =
      "config,offered_rps,concurrency,class,sent,completed,failed,met_slo,requests_per_s,"
      "output_tokens_per_s,goodput_rps,ttft_p50_ms,ttft_p95_ms,ttft_p99_ms,itl_p50_ms,itl_p95_ms,"
      "itl_p99_ms,e2e_p50_ms,e2e_p95_ms,e2e_p99_ms,error\n";
  for (const RunResult& r : runs) {
    for (const ClassStats& c : r.classes) {
      absl::StrAppend(&out, CsvField(r.config), ",", absl::StrFormat("%g", r.offered_rps), ",",
                      r.concurrency, ",", CsvField(c.name), ",", c.sent, ",", c.completed, ",",
                      c.failed, ",", c.met_slo, ",", absl::StrFormat("%.6g", c.requests_per_s), ",",
                      absl::StrFormat("%.6g", c.output_tokens_per_s), ",",
                      absl::StrFormat("%.6g", c.goodput_rps));
      for (const LatencySummary* s : {&c.ttft_s, &c.itl_s, &c.e2e_s}) {
        absl::StrAppend(&out, ",", CsvNumber(*s, s->p50), ",", CsvNumber(*s, s->p95), ",",
                        CsvNumber(*s, s->p99));
      }
      absl::StrAppend(&out, ",", CsvField(r.error), "\n");
    }
    if (r.classes.empty()) {
      absl::StrAppend(&out, CsvField(r.config), ",", absl::StrFormat("%g", r.offered_rps), ",",
                      r.concurrency, ",all,0,0,0,0,0,0,0,,,,,,,,,,", CsvField(r.error), "\n");
    }
  }
  return out;
}

}  // namespace convoy::bench
