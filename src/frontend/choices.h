// A request's n choices (InferRequest.n, OpenAI's and KServe's `n`): one GenerationSession each, so
// one request each in the engine. The rules every protocol shares live here, once: how many
// choices a request may have (request_limits.max_choices), each choice's request (choice i samples
// with the request's seed + i when it has one; each draws its own seed otherwise), the first
// failure ending the others, and the usage of all of them together (the prompt once).
#ifndef CONVOY_FRONTEND_CHOICES_H_
#define CONVOY_FRONTEND_CHOICES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "convoy/v1/inference.pb.h"
#include "frontend/generation.h"

namespace convoy {

// The number of choices a request asking for `n` gets: 1 for 0 or 1, else n. INVALID_ARGUMENT
// starting "n: " for a negative n or one above the serving limits' max_choices (naming the limit
// and request_limits.max_choices); UNAVAILABLE for n > 1 while the model loads (the limit is not
// known yet).
absl::StatusOr<int32_t> CountChoices(int64_t n, const GenerationHub& hub);

// `request` as choice `index` runs it: n cleared, and sampling.seed + index when it has a seed.
v1::InferRequest ChoiceRequest(const v1::InferRequest& request, int32_t index);

// The sessions of one request's choices, and what the adapter has taken of them. Begin, ClientGone,
// Detach and slow_client are thread-safe (as the sessions' own); Take and what reads the ends are
// not: the adapter calls them under its own mutex.
class ChoiceGroup {
 public:
  // `n` >= 1 sessions of `hub`, each waking `wake` (GenerationSession::WakeFn's rules).
  ChoiceGroup(GenerationHub* hub, int32_t n, const GenerationSession::WakeFn& wake);
  ChoiceGroup(const ChoiceGroup&) = delete;
  ChoiceGroup& operator=(const ChoiceGroup&) = delete;

  // Begins every choice with ChoiceRequest(request, i) (GenerationSession::Begin). Every session
  // exists before: ClientGone may come at any time.
  void Begin(const v1::InferRequest& request, absl::Time call_deadline, const CallOrigin& origin);
  // Ends every session (the client went away, or a choice failed); a session ended already
  // ignores it. Never call it from inside a wake holding a lock the wake takes.
  void ClientGone() const;
  // Detaches every session (GenerationSession::Detach).
  void Detach() const;
  // Whether the hub ended any choice because its output waited untaken too long.
  bool slow_client() const;

  int32_t size() const { return static_cast<int32_t>(choices_.size()); }
  const GenerationSession& session(int32_t i) const { return *choices_[i].session; }

  // Moves choice i's new output into `*out` (appending); returns its end once it has one (and at
  // every later call, with no more output). The first end that is not OK becomes failure().
  const std::optional<SessionEnd>& Take(int32_t i, SessionOutput* out);
  const std::optional<SessionEnd>& end(int32_t i) const { return choices_[i].end; }
  bool all_ended() const;
  // The end of the first choice that failed, as Take saw them; null while none has.
  const SessionEnd* failure() const;
  // Choice 0's end with the completion tokens of every choice: the prompt counted once.
  // REQUIRES: all_ended().
  SessionEnd Totals() const;

 private:
  struct Choice {
    std::shared_ptr<GenerationSession> session;
    std::optional<SessionEnd> end;
  };
  std::vector<Choice> choices_;
  std::optional<int32_t> failed_;  // the first choice whose end is not OK
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_CHOICES_H_
