// Constrained sampling: which tokens a sequence may generate next (a grammar, a JSON schema, a
// forced token). The engine's one hook for it:
//
//   frontend   makes a TokenConstraint for a request and wraps it in a TokenMask
//   (Request::constraint) scheduler  puts the TokenMask on each row that samples for that request
//   (StepRow::allowed_tokens),
//              and after the step tells it the token chosen (Accept), ending the request as stopped
//              once the constraint is done
//   engine     asks for the mask on a thread of its own while the forward pass runs (Prefetch)
//   executor   samples only among the allowed tokens (Get waits for, or computes, the mask)
//
// Who owns what: the TokenMask is shared by the request and the in-flight row; the constraint
// inside it is touched only through the TokenMask, which serialises its two users (the thread
// that computes the mask, and the engine thread that accepts a token).
#ifndef CONVOY_STEP_TOKEN_CONSTRAINT_H_
#define CONVOY_STEP_TOKEN_CONSTRAINT_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace convoy {

// One sequence's rule. Not thread-safe: TokenMask calls it from one thread at a time.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets bit i of `bits` (word i / 32, bit i % 32; (vocab_size + 31) / 32 words, zero on entry)
  // iff token i may come next. An end token is allowed when the text so far is complete.
  virtual void FillNextTokenMask(uint32_t* bits, int32_t vocab_size) = 0;
  // The token chosen at the position the last mask was for. An error (a token the mask did not
  // allow) ends the request with it.
  virtual absl::Status AcceptToken(int32_t token) = 0;
  // Nothing more may follow: the request ends as stopped.
  virtual bool IsTerminated() const = 0;
};

inline bool TokenAllowed(const uint32_t* bits, int32_t token) {
  return (bits[token >> 5] >> (token & 31)) & 1u;
}

// A constraint and the mask of the position to sample next. Thread-safe.
class TokenMask {
 public:
  // `vocab_size`: the model's (the logits' width), which may exceed the tokenizer's.
  TokenMask(std::unique_ptr<TokenConstraint> constraint, int32_t vocab_size)
      : constraint_(std::move(constraint)),
        vocab_size_(vocab_size),
        bits_((static_cast<size_t>(std::max(vocab_size, 0)) + 31) / 32) {}
  TokenMask(const TokenMask&) = delete;
  TokenMask& operator=(const TokenMask&) = delete;

  int32_t vocab_size() const { return vocab_size_; }

  // The mask for the next position: computed here unless another thread is computing it (then
  // waits for it) or it is computed already. Valid until the next Accept.
  const uint32_t* Get() {
    absl::MutexLock lock(&mu_);
    ComputeLocked();
    return bits_.data();
  }
  // Computes the mask ahead of Get (the engine, off its thread, while the forward pass runs).
  void Prefetch() { Get(); }

  // Advances by the token chosen; the next Get computes a new mask.
  absl::Status Accept(int32_t token) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &TokenMask::NotComputing));
    if (state_ == State::kReady &&
        (token < 0 || token >= vocab_size_ || !TokenAllowed(bits_.data(), token))) {
      return absl::InternalError(absl::StrCat(
          "token ", token, " was sampled although the request's constraint did not allow it"));
    }
    state_ = State::kStale;
    absl::Status status = constraint_->AcceptToken(token);
    terminated_ = constraint_->IsTerminated();
    return status;
  }
  // Nothing more may follow (as of the last Accept).
  bool terminated() const {
    absl::MutexLock lock(&mu_);
    return terminated_;
  }

 private:
  enum class State { kStale, kComputing, kReady };

  bool NotComputing() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ != State::kComputing;
  }
  void ComputeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    mu_.Await(absl::Condition(this, &TokenMask::NotComputing));
    if (state_ == State::kReady) return;
    state_ = State::kComputing;
    std::fill(bits_.begin(), bits_.end(), 0u);
    {
      // The constraint runs unlocked: only this thread may touch it while kComputing.
      mu_.Unlock();
      constraint_->FillNextTokenMask(bits_.data(), vocab_size_);
      mu_.Lock();
    }
    state_ = State::kReady;
  }

  const std::unique_ptr<TokenConstraint> constraint_;
  const int32_t vocab_size_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kStale;
  bool terminated_ ABSL_GUARDED_BY(mu_) = false;
  // Written only while kComputing (by the computing thread), read once kReady.
  std::vector<uint32_t> bits_;
};

}  // namespace convoy

#endif  // CONVOY_STEP_TOKEN_CONSTRAINT_H_
