#include "executor/fake/fake_device_executor.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"

namespace convoy {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Sleeps until `deadline` on the monotonic clock, to the microsecond where the kernel allows.
void SleepUntil(SteadyClock::time_point deadline) {
  const auto since_epoch = deadline.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  timespec at{};
  at.tv_sec = static_cast<time_t>(secs.count());
  at.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - secs).count());
  // steady_clock is CLOCK_MONOTONIC on Linux (libstdc++ and libc++).
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
}

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeDeviceExecutor>> FakeDeviceExecutor::Create(
    const ModelConfig& model, const FakeDeviceOptions& options) {
  if (model.vocab_size <= 0) {
    return absl::InvalidArgumentError("the fake device needs a model with a vocabulary");
  }
  if (options.step_time <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the fake device's step time must be positive, got %s",
                        absl::FormatDuration(options.step_time)));
  }
  if (options.time_per_token < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the fake device's time per token must not be negative");
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("block_size must be positive, got %d", options.block_size));
  }
  std::unique_ptr<FakeDeviceExecutor> executor(new FakeDeviceExecutor(model, options));
  if (executor->kv_.num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kv_cache_bytes %d holds no block: one block of %d tokens takes %d bytes",
                        options.kv_cache_bytes, options.block_size, executor->kv_.BytesPerBlock()));
  }
  if (static_cast<int64_t>(executor->never_sample_.size()) >= model.vocab_size) {
    return absl::InvalidArgumentError("the fake device may sample no token at all");
  }
  executor->device_ = std::thread([raw = executor.get()] { raw->DeviceThread(); });
  return executor;
}

FakeDeviceExecutor::FakeDeviceExecutor(const ModelConfig& model, const FakeDeviceOptions& options)
    : model_(model),
      options_(options),
      never_sample_(options.never_sample.begin(), options.never_sample.end()) {
  // The shape the scheduler plans for, as the CPU executor's fp32 cache would have it.
  kv_.num_layers = static_cast<int32_t>(model.num_hidden_layers);
  kv_.num_kv_heads = static_cast<int32_t>(std::max<int64_t>(model.num_key_value_heads, 1));
  kv_.head_dim = static_cast<int32_t>(std::max<int64_t>(model.head_dim, 1));
  kv_.num_layers = std::max(kv_.num_layers, 1);
  kv_.block_size = options.block_size;
  kv_.dtype = KvDtype::kF32;
  kv_.num_blocks = kv_.BlocksForBudget(options.kv_cache_bytes);
}

FakeDeviceExecutor::~FakeDeviceExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (device_.joinable()) device_.join();
}

ExecutorLimits FakeDeviceExecutor::limits() const {
  ExecutorLimits limits;
  limits.computes_padding = false;
  limits.applies_extended_sampling = false;
  limits.scores_prompts = false;
  return limits;
}

absl::Status FakeDeviceExecutor::CheckRow(const StepRow& row) const {
  RETURN_IF_ERROR(Executor::CheckRow(row));
  RETURN_IF_ERROR(RefusePromptScoring(row, "fake device"));
  return RefuseExtendedSampling(row, "fake device");
}

int32_t FakeDeviceExecutor::TokenAfter(int32_t last_token, int64_t position) const {
  const uint64_t h =
      Mix((static_cast<uint64_t>(last_token) << 32) ^ static_cast<uint64_t>(position));
  int32_t token = static_cast<int32_t>(h % static_cast<uint64_t>(model_.vocab_size));
  while (never_sample_.contains(token))
    token = (token + 1) % static_cast<int32_t>(model_.vocab_size);
  return token;
}

absl::StatusOr<StepResult> FakeDeviceExecutor::Step(const StepPlan& plan) {
  RETURN_IF_ERROR(Launch(plan));
  return Collect();
}

absl::Status FakeDeviceExecutor::Launch(const StepPlan& plan) {
  // The step starts now, as on a device whose queue is empty; it ends a fixed time later however
  // soon the device thread picks it up.
  int64_t tokens = 0;
  for (const StepRow& row : plan.rows) tokens += static_cast<int64_t>(row.token_ids.size());
  const SteadyClock::time_point now = SteadyClock::now();
  absl::MutexLock lock(&mu_);
  if (launched_) return absl::FailedPreconditionError("a step is launched and not collected");
  // The tables change here, on the launching thread, while no step runs; the rest of the plan is
  // checked on the device thread (Run), as a device's own checks would be.
  RETURN_IF_ERROR(AcceptTables(plan));
  launched_ = true;
  step_end_ =
      now + absl::ToChronoNanoseconds(options_.step_time + options_.time_per_token * tokens);
  step_start_ = now;
  pending_ = &plan;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> FakeDeviceExecutor::Collect() {
  SteadyClock::time_point step_end;
  {
    absl::MutexLock lock(&mu_);
    if (!launched_) return absl::FailedPreconditionError("no step is launched");
    step_end = step_end_;
  }
  // The caller sleeps until the step's end on its own timer, as a host polls a device for a
  // step's completion: the device thread, done long before, has no one to wake.
  thread_local const bool precise = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)precise;
  SleepUntil(step_end);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  done_ = false;
  launched_ = false;
  if (!done_status_.ok()) return std::move(done_status_);
  // The device's whole step, launch to end, less what Run measured as checking and sampling.
  done_result_.times.forward = absl::FromChrono(step_end - step_start_) -
                               done_result_.times.prepare - done_result_.times.sample;
  return std::move(done_result_);
}

void FakeDeviceExecutor::DeviceThread() {
  // Launch wakes no one (a wake-up costs the launching thread tens of microseconds on a virtual
  // machine, which a GPU launch does not): while steps come, this thread looks for the next one
  // every kPoll, and blocks only after kIdle without one.
  constexpr auto kPoll = std::chrono::microseconds(25);
  constexpr auto kIdle = std::chrono::milliseconds(50);
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  SteadyClock::time_point last_step = SteadyClock::now();
  while (true) {
    const StepPlan* plan = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (!pending_ && !stopping_ && SteadyClock::now() - last_step >= kIdle) {
        auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return pending_ != nullptr || stopping_;
        };
        mu_.Await(absl::Condition(&has_work));
      }
      if (pending_ != nullptr) {
        plan = pending_;
        pending_ = nullptr;
      } else if (stopping_) {
        return;  // nothing launched
      }
    }
    if (plan == nullptr) {
      SleepUntil(SteadyClock::now() + kPoll);
      continue;
    }
    StepResult result;
    absl::Status status = Run(*plan, &result);
    {
      absl::MutexLock lock(&mu_);
      done_status_ = std::move(status);
      done_result_ = std::move(result);
      done_ = true;
    }
    last_step = SteadyClock::now();
  }
}

absl::Status FakeDeviceExecutor::Run(const StepPlan& plan, StepResult* out) const {
  const SteadyClock::time_point start = SteadyClock::now();
  RETURN_IF_ERROR(ValidateStepPlan(plan, model_, kv_));
  StepResult& result = *out;
  const SteadyClock::time_point checked = SteadyClock::now();
  result.times.prepare = absl::FromChrono(checked - start);
  result.rows.resize(plan.rows.size());
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    const int32_t len = static_cast<int32_t>(row.token_ids.size());
    result.real_tokens += len;
    result.padded_length = std::max(result.padded_length, len);
    RowResult& out = result.rows[r];
    out.seq_id = row.seq_id;
    if (!row.sample) continue;
    const int64_t position = row.start_pos + len;
    int32_t token = TokenAfter(row.token_ids.back(), position);
    if (row.allowed_tokens != nullptr) {
      // The first allowed token from the unconstrained one on, end-of-generation ids included:
      // a constraint that allows only the end must end the request.
      const uint32_t* allowed = row.allowed_tokens->Get();
      const int32_t vocab = static_cast<int32_t>(model_.vocab_size);
      int32_t found = -1;
      for (int32_t i = 0; i < vocab && found < 0; ++i) {
        const int32_t candidate = (token + i) % vocab;
        if (TokenAllowed(allowed, candidate)) found = candidate;
      }
      if (found < 0) {
        out.status = NoAllowedTokenError(row.seq_id);
        continue;
      }
      token = found;
    }
    out.token = token;
    out.logprob = 0.0f;  // the fake is certain
    for (int32_t k = 0; k < row.sampling.num_top_logprobs; ++k) {
      out.top_logprobs.push_back(
          {static_cast<int32_t>((token + k) % model_.vocab_size), k == 0 ? 0.0f : -30.0f});
    }
  }
  result.computed_tokens = result.real_tokens;
  result.padded_tokens = 0;
  result.times.sample = absl::FromChrono(SteadyClock::now() - checked);
  return absl::OkStatus();
}

}  // namespace convoy
