// The engine's overlap with a device, measured without a GPU (issue 23): the engine loop drives the
// fake device (src/executor/fake/fake_device_executor.h), whose every step takes a fixed time on a
// thread of its own, with N requests decoding at once (each finished request replaced by a new
// one, so the batch stays full). For each N it runs the loop twice, side by side: handing each
// step's events to the callbacks between two steps (the synchronous order) and while the next step
// runs (the overlap). It prints, per run:
//   - the inter-token latency p50 and p99 that the callbacks saw, and the p50 as a ratio of the
//     device's step as the device measured it in the same run;
//   - the engine thread's own time per step (plan + launch + emit + plan_ahead + apply; p50 and
//     p99), and the part of it left between two steps on the critical path (plan + launch +
//     apply).
// The callbacks do `--emit-us` of work per event (a front end's serializing and writing).
//
//   engine_bench [--step-us 2000] [--rows 64,256] [--seconds 4] [--emit-us 1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/engine_loop.h"
#include "executor/fake/fake_device_executor.h"

namespace convoy {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Flags {
  int64_t step_us = 2000;
  std::vector<int> rows = {64, 256};
  double seconds = 4;
  int64_t emit_us = 1;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

class PhaseLog : public SchedulerObserver {
 public:
  void OnStepPhases(const StepPhases& p) override {
    if (!recording.load()) return;
    engine_us.push_back(absl::ToDoubleMicroseconds(p.engine_thread));
    critical_us.push_back(absl::ToDoubleMicroseconds(p.plan + p.launch + p.apply));
    plan_us.push_back(absl::ToDoubleMicroseconds(p.plan));
    launch_us.push_back(absl::ToDoubleMicroseconds(p.launch));
    apply_us.push_back(absl::ToDoubleMicroseconds(p.apply));
    emit_us.push_back(absl::ToDoubleMicroseconds(p.emit));
    device_us.push_back(
        absl::ToDoubleMicroseconds(p.executor.prepare + p.executor.forward + p.executor.sample));
  }
  std::atomic<bool> recording{false};
  // Only the loop thread writes; read after it stops.
  std::vector<double> engine_us, critical_us, device_us, plan_us, launch_us, apply_us, emit_us;
};

// Busy work of about `us` microseconds on the calling thread.
void Spin(int64_t us) {
  const auto until = SteadyClock::now() + std::chrono::microseconds(us);
  while (SteadyClock::now() < until) {
  }
}

struct RunResult {
  double itl_p50 = 0, itl_p99 = 0, device_mean = 0, engine_p50 = 0, engine_p99 = 0,
         critical_p50 = 0, critical_p99 = 0, plan_p50 = 0, launch_p50 = 0, apply_p50 = 0,
         emit_p50 = 0;
  int64_t steps = 0;
};

// How the loop drives the device: the synchronous order, events out during the next step, and
// that with the next step planned while one runs.
enum class Mode { kSync, kOverlap, kPlanAhead };

RunResult RunOnce(const Flags& flags, int rows, Mode mode) {
  ModelConfig model;  // a Llama-sized vocabulary and context; no weights
  model.vocab_size = 32000;
  model.hidden_size = 2048;
  model.num_hidden_layers = 16;
  model.num_attention_heads = 32;
  model.num_key_value_heads = 8;
  model.head_dim = 64;
  model.max_position_embeddings = 8192;
  FakeDeviceOptions device_options;
  device_options.step_time = absl::Microseconds(flags.step_us);
  device_options.block_size = 16;
  device_options.kv_cache_bytes = int64_t{64} << 30;  // nothing is allocated
  auto device = FakeDeviceExecutor::Create(model, device_options);
  if (!device.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", device.status().ToString().c_str());
    std::exit(1);
  }
  PhaseLog phases;
  EngineLoopOptions options;
  options.scheduler.max_batch_size = rows;
  options.scheduler.max_num_batched_tokens = 65536;
  options.scheduler.prefill_chunk_size = 2048;
  options.scheduler.block_size = 16;
  options.observer = &phases;
  options.emit_during_next_step = mode != Mode::kSync;
  options.plan_ahead = mode == Mode::kPlanAhead;
  auto loop = EngineLoop::Create(device->get(), options);
  if (!loop.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", loop.status().ToString().c_str());
    std::exit(1);
  }

  // Per slot: the time of its request's last token. Callbacks run on the loop thread only.
  std::vector<SteadyClock::time_point> last(rows);
  std::vector<double> itl_us;
  itl_us.reserve(1 << 20);
  std::atomic<bool> recording{false};
  std::atomic<bool> stopping{false};
  std::atomic<RequestId> next_id{1};
  std::function<void(int)> submit;
  submit = [&](int slot) {
    Request request;
    request.id = next_id.fetch_add(1);
    for (int i = 0; i < 64; ++i)
      request.prompt_tokens.push_back(static_cast<int32_t>((request.id * 131 + i) % 30000));
    request.max_tokens = 512;
    last[slot] = SteadyClock::time_point{};
    const absl::Status submitted = (*loop)->Submit(std::move(request), [&, slot](const Event& e) {
      Spin(flags.emit_us);
      if (e.kind == Event::Kind::kToken) {
        const auto now = SteadyClock::now();
        if (last[slot] != SteadyClock::time_point{} && recording.load()) {
          itl_us.push_back(std::chrono::duration<double, std::micro>(now - last[slot]).count());
        }
        last[slot] = now;
      } else if (!stopping.load()) {
        submit(slot);  // from the loop thread: Submit only queues it
      }
    });
    if (!submitted.ok()) {
      std::fprintf(stderr, "engine_bench: %s\n", submitted.ToString().c_str());
      std::exit(1);
    }
  };
  for (int slot = 0; slot < rows; ++slot) submit(slot);
  absl::SleepFor(absl::Seconds(1));  // every request admitted and decoding
  phases.recording = true;
  recording = true;
  absl::SleepFor(absl::Seconds(flags.seconds));
  recording = false;
  phases.recording = false;
  stopping = true;
  (*loop)->Shutdown(/*drain=*/false);

  RunResult r;
  r.itl_p50 = Percentile(itl_us, 0.5);
  r.itl_p99 = Percentile(itl_us, 0.99);
  double sum = 0;
  for (double d : phases.device_us) sum += d;
  r.device_mean = phases.device_us.empty() ? 0 : sum / phases.device_us.size();
  r.engine_p50 = Percentile(phases.engine_us, 0.5);
  r.engine_p99 = Percentile(phases.engine_us, 0.99);
  r.critical_p50 = Percentile(phases.critical_us, 0.5);
  r.critical_p99 = Percentile(phases.critical_us, 0.99);
  r.steps = static_cast<int64_t>(phases.device_us.size());
  r.plan_p50 = Percentile(phases.plan_us, 0.5);
  r.launch_p50 = Percentile(phases.launch_us, 0.5);
  r.apply_p50 = Percentile(phases.apply_us, 0.5);
  r.emit_p50 = Percentile(phases.emit_us, 0.5);
  return r;
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--step-us" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &flags->step_us) || flags->step_us <= 0) return false;
    } else if (arg == "--seconds" && has_value) {
      if (!absl::SimpleAtod(argv[++i], &flags->seconds) || flags->seconds <= 0) return false;
    } else if (arg == "--emit-us" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &flags->emit_us) || flags->emit_us < 0) return false;
    } else if (arg == "--rows" && has_value) {
      flags->rows.clear();
      for (absl::string_view part : absl::StrSplit(argv[++i], ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(part, &n) || n <= 0) return false;
        flags->rows.push_back(n);
      }
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::Flags flags;
  if (!convoy::ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: engine_bench [--step-us N] [--rows N,N] [--seconds S] [--emit-us N]\n");
    return 2;
  }
  std::printf("fake device step %lld us, %lld us of callback work per event, %.1f s a run\n\n",
              static_cast<long long>(flags.step_us), static_cast<long long>(flags.emit_us),
              flags.seconds);
  std::printf(
      "| rows | events out | steps | device step (us) | ITL p50 (us) | ITL p99 (us) | ITL p50 / "
      "step | engine thread p50 / p99 (us) | between steps p50 / p99 (us) | plan / launch / "
      "apply / emit p50 (us) |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  for (int rows : flags.rows) {
    for (convoy::Mode mode :
         {convoy::Mode::kSync, convoy::Mode::kOverlap, convoy::Mode::kPlanAhead}) {
      const convoy::RunResult r = convoy::RunOnce(flags, rows, mode);
      std::printf(
          "| %d | %s | %lld | %.0f | %.0f | %.0f | %.3f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f "
          "/ %.0f / %.0f |\n",
          rows,
          mode == convoy::Mode::kSync      ? "between steps"
          : mode == convoy::Mode::kOverlap ? "during the next step"
                                           : "during the next step, planned ahead",
          static_cast<long long>(r.steps), r.device_mean, r.itl_p50, r.itl_p99,
          r.device_mean > 0 ? r.itl_p50 / r.device_mean : 0.0, r.engine_p50, r.engine_p99,
          r.critical_p50, r.critical_p99, r.plan_p50, r.launch_p50, r.apply_p50, r.emit_p50);
      std::fflush(stdout);
    }
  }
  return 0;
}
