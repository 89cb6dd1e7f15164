#include "bench/loadgen/workload.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/text_proto.h"
#include "convoy/status_macros.h"
#include "google/protobuf/text_format.h"

namespace convoy::bench {
namespace {

using google::protobuf::TextFormat;

using Step = FieldStep;
using Path = FieldPath;
using Locator = TextProtoLocator;

// A shared prefix longer than any context a model here has is a mistake in the file.
constexpr int32_t kMaxSharedPrefixTokens = 1 << 20;

Path Append(Path path, Step step) {
  path.push_back(step);
  return path;
}

absl::Status ValidateLength(const v1::LengthDistribution& d, const Path& path, const Locator& at) {
  switch (d.kind_case()) {
    case v1::LengthDistribution::kFixed:
      if (d.fixed() < 1) return at.Error(Append(path, {"fixed"}), "must be at least 1");
      return absl::OkStatus();
    case v1::LengthDistribution::kUniform: {
      const Path here = Append(path, {"uniform"});
      if (d.uniform().min() < 1) return at.Error(Append(here, {"min"}), "must be at least 1");
      if (d.uniform().max() < d.uniform().min()) {
        return at.Error(
            Append(here, {"max"}),
            absl::StrFormat("max %d is below min %d", d.uniform().max(), d.uniform().min()));
      }
      return absl::OkStatus();
    }
    case v1::LengthDistribution::kLognormal: {
      const Path here = Append(path, {"lognormal"});
      const auto& l = d.lognormal();
      if (!(l.median() >= 1)) return at.Error(Append(here, {"median"}), "must be at least 1");
      if (!(l.sigma() >= 0)) return at.Error(Append(here, {"sigma"}), "must not be negative");
      if (l.min() < 0) return at.Error(Append(here, {"min"}), "must not be negative");
      if (l.max() != 0 && l.max() < std::max(l.min(), 1)) {
        return at.Error(Append(here, {"max"}), "must be 0 (no bound) or at least min");
      }
      return absl::OkStatus();
    }
    case v1::LengthDistribution::KIND_NOT_SET:
      break;
  }
  return at.Error(path, "is required: give one of fixed, uniform or lognormal");
}

void FillDefaults(v1::Workload& w) {
  if (!w.has_duration_s()) w.set_duration_s(30);
  if (w.arrival().has_open_loop()) {
    v1::OpenLoop& open = *w.mutable_arrival()->mutable_open_loop();
    if (open.pattern() == v1::OpenLoop::PATTERN_UNSPECIFIED)
      open.set_pattern(v1::OpenLoop::POISSON);
    if (!open.has_burstiness()) open.set_burstiness(0.25);
  }
  for (v1::RequestClass& c : *w.mutable_request_class()) {
    if (!c.has_weight()) c.set_weight(1);
    for (v1::LengthDistribution* d : {c.mutable_prompt_tokens(), c.mutable_output_tokens()}) {
      if (d->has_lognormal() && d->lognormal().min() == 0) d->mutable_lognormal()->set_min(1);
    }
  }
}

absl::Status Validate(const v1::Workload& w, const Locator& at) {
  switch (w.arrival().process_case()) {
    case v1::Arrival::kClosedLoop:
      if (w.arrival().closed_loop().concurrency() < 1) {
        return at.Error({{"arrival"}, {"closed_loop"}, {"concurrency"}}, "must be at least 1");
      }
      break;
    case v1::Arrival::kOpenLoop: {
      const v1::OpenLoop& open = w.arrival().open_loop();
      if (!(open.rate_rps() > 0)) {
        return at.Error({{"arrival"}, {"open_loop"}, {"rate_rps"}}, "must be above 0");
      }
      if (!(open.burstiness() > 0 && open.burstiness() <= 1)) {
        return at.Error({{"arrival"}, {"open_loop"}, {"burstiness"}}, "must be in (0, 1]");
      }
      break;
    }
    case v1::Arrival::PROCESS_NOT_SET:
      return at.Error({{"arrival"}}, "is required: give closed_loop or open_loop");
  }
  if (w.request_class_size() == 0) {
    return at.Error({{"request_class"}}, "at least one request_class is required");
  }
  std::set<std::string> names;
  for (int i = 0; i < w.request_class_size(); ++i) {
    const v1::RequestClass& c = w.request_class(i);
    const Path here = {{"request_class", i}};
    if (c.name().empty()) return at.Error(Append(here, {"name"}), "is required");
    if (!names.insert(c.name()).second) {
      return at.Error(Append(here, {"name"}),
                      absl::StrCat("duplicate class name '", c.name(), "'"));
    }
    if (!(c.weight() > 0)) return at.Error(Append(here, {"weight"}), "must be above 0");
    if (c.priority() < 0) return at.Error(Append(here, {"priority"}), "must not be negative");
    if (!(c.temperature() >= 0)) {
      return at.Error(Append(here, {"temperature"}), "must not be negative");
    }
    if (c.shared_prefix_tokens() < 0 || c.shared_prefix_tokens() > kMaxSharedPrefixTokens) {
      return at.Error(Append(here, {"shared_prefix_tokens"}),
                      absl::StrCat("must be in 0..", kMaxSharedPrefixTokens));
    }
    if (!c.has_prompt_tokens()) return at.Error(Append(here, {"prompt_tokens"}), "is required");
    if (!c.has_output_tokens()) return at.Error(Append(here, {"output_tokens"}), "is required");
    RETURN_IF_ERROR(ValidateLength(c.prompt_tokens(), Append(here, {"prompt_tokens"}), at));
    RETURN_IF_ERROR(ValidateLength(c.output_tokens(), Append(here, {"output_tokens"}), at));
  }
  if (!(w.duration_s() > 0)) return at.Error({{"duration_s"}}, "must be above 0");
  if (w.num_requests() < 0) return at.Error({{"num_requests"}}, "must not be negative");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Workload> ParseWorkload(absl::string_view text, absl::string_view source) {
  v1::Workload workload;
  TextFormat::ParseInfoTree tree;
  RETURN_IF_ERROR(ParseTextProto(text, source, &workload, &tree));
  FillDefaults(workload);
  RETURN_IF_ERROR(Validate(workload, Locator(v1::Workload::descriptor(), &tree, source)));
  return workload;
}

absl::StatusOr<v1::Workload> LoadWorkload(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read workload file ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseWorkload(text.str(), path);
}

std::string DescribeArrival(const v1::Arrival& arrival) {
  if (arrival.has_closed_loop()) {
    return absl::StrFormat("closed loop, %d in flight", arrival.closed_loop().concurrency());
  }
  const v1::OpenLoop& open = arrival.open_loop();
  switch (open.pattern()) {
    case v1::OpenLoop::BURSTY:
      return absl::StrFormat("open loop, bursty (gamma shape %g), %g req/s", open.burstiness(),
                             open.rate_rps());
    case v1::OpenLoop::CONSTANT:
      return absl::StrFormat("open loop, constant, %g req/s", open.rate_rps());
    default:
      return absl::StrFormat("open loop, Poisson, %g req/s", open.rate_rps());
  }
}

}  // namespace convoy::bench
