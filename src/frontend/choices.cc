#include "frontend/choices.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace convoy {

absl::StatusOr<int32_t> CountChoices(int64_t n, const GenerationHub& hub) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("n: must be >= 0, got ", n));
  if (n <= 1) return 1;
  const ServingContext* serving = hub.serving();
  if (serving == nullptr) return absl::UnavailableError("the model is loading; retry shortly");
  const int32_t max_choices = serving->limits.max_choices;
  if (n > max_choices) {
    return absl::InvalidArgumentError(absl::StrCat("n: ", n,
                                                   " choices; this server allows at most ",
                                                   max_choices, " (request_limits.max_choices)"));
  }
  return static_cast<int32_t>(n);
}

v1::InferRequest ChoiceRequest(const v1::InferRequest& request, int32_t index) {
  v1::InferRequest choice = request;
  choice.clear_n();
  if (index > 0 && choice.sampling().has_seed()) {
    choice.mutable_sampling()->set_seed(choice.sampling().seed() + static_cast<uint64_t>(index));
  }
  return choice;
}

ChoiceGroup::ChoiceGroup(GenerationHub* hub, int32_t n, const GenerationSession::WakeFn& wake)
    : choices_(static_cast<size_t>(std::max(n, 1))) {
  for (Choice& choice : choices_) choice.session = GenerationSession::Create(hub, wake);
}

void ChoiceGroup::Begin(const v1::InferRequest& request, absl::Time call_deadline,
                        const CallOrigin& origin) {
  for (int32_t i = 0; i < size(); ++i) {
    choices_[i].session->Begin(ChoiceRequest(request, i), call_deadline, origin);
  }
}

void ChoiceGroup::ClientGone() const {
  for (const Choice& choice : choices_) choice.session->ClientGone();
}

void ChoiceGroup::Detach() const {
  for (const Choice& choice : choices_) choice.session->Detach();
}

bool ChoiceGroup::slow_client() const {
  return std::any_of(choices_.begin(), choices_.end(),
                     [](const Choice& choice) { return choice.session->slow_client(); });
}

const std::optional<SessionEnd>& ChoiceGroup::Take(int32_t i, SessionOutput* out) {
  Choice& choice = choices_[i];
  if (choice.end) return choice.end;
  choice.end = choice.session->Take(out);
  if (choice.end && !choice.end->status.ok() && !failed_) failed_ = i;
  return choice.end;
}

bool ChoiceGroup::all_ended() const {
  return std::all_of(choices_.begin(), choices_.end(),
                     [](const Choice& choice) { return choice.end.has_value(); });
}

const SessionEnd* ChoiceGroup::failure() const {
  return failed_ ? &*choices_[*failed_].end : nullptr;
}

SessionEnd ChoiceGroup::Totals() const {
  SessionEnd totals = *choices_[0].end;
  for (size_t i = 1; i < choices_.size(); ++i) {
    totals.completion_tokens += choices_[i].end->completion_tokens;
  }
  return totals;
}

}  // namespace convoy
