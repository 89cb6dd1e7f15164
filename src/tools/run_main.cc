// convoy-run: generates from a model in-process through the same scheduler and engine loop as
// convoyd (no gRPC), every prompt submitted at once so that they share steps.
//   convoy-run --model DIR|FILE.gguf --token-ids 1,2,3 | --prompt TEXT | --chat TEXT [...more]
//              [--system TEXT] --max-tokens 16
//              [--temperature T --top-k K --top-p P --seed S --top-logprobs N] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine_loop.h"
#include "executor/cpu/cpu_executor.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "text/chat_prompt.h"
#include "tools/cli_flags.h"
#include "tools/cpu_format_flags.h"

ABSL_FLAG(std::string, model, "", "Model: a directory (config.json + safetensors) or a .gguf file");
ABSL_FLAG(int32_t, max_tokens, 16, "Tokens to generate per prompt");
ABSL_FLAG(float, temperature, 0.0f, "Sampling temperature; 0 is greedy");
ABSL_FLAG(int32_t, top_k, 0, "Sample among the k most likely tokens; 0 for all");
ABSL_FLAG(float, top_p, 1.0f, "Nucleus sampling mass, in (0, 1]");
ABSL_FLAG(uint64_t, seed, 0, "Sampling seed (same seed, same tokens)");
ABSL_FLAG(int32_t, top_logprobs, 0, "Also return the N most likely tokens' logprobs per step");
ABSL_FLAG(std::string, stop_token_ids, "", "Comma-separated token ids that end generation");
ABSL_FLAG(bool, json, false, "Print one JSON object per prompt");
ABSL_FLAG(int32_t, threads, 0, "CPU threads; 0 for every core");
ABSL_FLAG(int64_t, kv_cache_mb, 512, "KV cache memory budget in MiB");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV cache block");
ABSL_FLAG(int32_t, prefill_chunk, 0, "Longest prompt chunk per step; 0 for the whole prompt");
ABSL_FLAG(std::string, weights, "auto",
          "Weight format for the matrix products: auto, f32, bf16, native (quantized blocks)");
ABSL_FLAG(std::string, kv_dtype, "f32", "Type the KV cache stores K and V in: f32, bf16, int8");
ABSL_FLAG(std::string, system, "", "A system message before each --chat prompt");

namespace {

const convoy::cli::CommandLine kCommandLine = {
    "convoy-run",
    "convoy-run --model DIR|FILE.gguf --token-ids 1,2,3 | --prompt TEXT | --chat TEXT [more\n"
    "           prompts] [--system TEXT] [--max-tokens N] [--temperature T --top-k K --top-p P\n"
    "           --seed S] [--top-logprobs N] [--json]\n\n"
    "Generates from a model in-process, every prompt batched together. Prompts are token ids,\n"
    "raw text (--prompt) or one user turn through the model's chat template (--chat, after the\n"
    "--system message if given); text and chat prompts stop at the tokenizer's end of sequence.\n"
    "Outputs are numbered in the order: --token-ids, then --prompt, then --chat prompts.",
    {"model", "max_tokens", "temperature", "top_k", "top_p", "seed", "top_logprobs",
     "stop_token_ids", "json", "threads", "kv_cache_mb", "block_size", "prefill_chunk", "weights",
     "kv_dtype", "system"},
    {"token_ids", "prompt", "chat"}};

int Fail(const std::string& message) { return convoy::cli::BadUsage(kCommandLine, message); }

struct RunRequest {
  std::vector<int32_t> prompt;
  convoy::SamplingParams sampling;
  int32_t max_tokens = 16;
  std::vector<int32_t> stop_token_ids;
};

struct RunOutput {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  std::vector<std::vector<convoy::TokenLogprob>> top_logprobs;
  std::optional<convoy::Event> final;
};

// Runs `requests` to their ends on `executor` through an engine loop of its own (the scheduler
// convoyd uses), all submitted at once: one batch as wide as the requests, prompt chunks of
// `prefill_chunk` tokens (0: whole prompts). A request that does not complete is an error naming
// it.
absl::StatusOr<std::vector<RunOutput>> RunAll(convoy::Executor* executor,
                                              const std::vector<RunRequest>& requests,
                                              int32_t prefill_chunk,
                                              convoy::SchedulerStats* stats) {
  const int64_t vocab = executor->model_config().vocab_size;
  const convoy::ExecutorLimits limits = executor->limits();
  int32_t longest = 1;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RunRequest& r = requests[i];
    longest = std::max(longest, static_cast<int32_t>(r.prompt.size()));
    auto bad = [i](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("prompt ", i, ": ", what));
    };
    if (r.max_tokens < 1)
      return bad(absl::StrCat("max_tokens must be at least 1, got ", r.max_tokens));
    if (std::optional<convoy::SamplingParamError> error =
            convoy::CheckSamplingParams(r.sampling, limits.max_top_logprobs)) {
      return bad(absl::StrCat(error->field, " ", error->reason));
    }
    for (int32_t id : r.prompt) {
      if (id < 0 || id >= vocab) {
        return bad(absl::StrCat("token id ", id, " is outside the vocabulary of ", vocab));
      }
    }
  }
  convoy::EngineLoopOptions options;
  convoy::SchedulerOptions& s = options.scheduler;
  s.max_batch_size = std::max<int32_t>(1, static_cast<int32_t>(requests.size()));
  s.prefill_chunk_size = prefill_chunk > 0 ? prefill_chunk : longest;
  s.max_num_batched_tokens =
      std::max<int64_t>(s.max_batch_size, int64_t{s.max_batch_size} * s.prefill_chunk_size);
  s.block_size = executor->kv_spec().block_size;
  s.default_queue_policy.max_queue_size = 0;  // every prompt waits its turn
  s.priority_aging = absl::InfiniteDuration();
  absl::StatusOr<std::unique_ptr<convoy::EngineLoop>> loop =
      convoy::EngineLoop::Create(executor, options);
  if (!loop.ok()) return loop.status();

  absl::Mutex mu;
  std::vector<RunOutput> outputs(requests.size());
  size_t finals = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    convoy::Request request;
    request.id = static_cast<convoy::RequestId>(i + 1);
    request.prompt_tokens = requests[i].prompt;
    request.sampling = requests[i].sampling;
    request.max_tokens = requests[i].max_tokens;
    request.stop_token_ids = requests[i].stop_token_ids;
    absl::Status submitted = (*loop)->Submit(std::move(request), [&, i](const convoy::Event& e) {
      absl::MutexLock lock(&mu);
      RunOutput& out = outputs[i];
      if (e.kind == convoy::Event::Kind::kFinal) {
        out.final = e;
        ++finals;
        return;
      }
      out.token_ids.push_back(e.token);
      out.logprobs.push_back(e.logprob);
      if (!e.top_logprobs.empty()) out.top_logprobs.push_back(e.top_logprobs);
    });
    if (!submitted.ok()) {
      return absl::Status(submitted.code(), absl::StrCat("prompt ", i, ": ", submitted.message()));
    }
  }
  {
    absl::MutexLock lock(&mu);
    auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return finals == requests.size(); };
    mu.Await(absl::Condition(&all_done));
  }
  *stats = (*loop)->stats();
  (*loop)->Shutdown(/*drain=*/true);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const convoy::Event& final = *outputs[i].final;
    if (final.outcome != convoy::Outcome::kCompleteLength &&
        final.outcome != convoy::Outcome::kCompleteStop) {
      return absl::Status(final.status.ok() ? absl::StatusCode::kInternal : final.status.code(),
                          absl::StrCat("prompt ", i, ": ", convoy::OutcomeName(final.outcome), ": ",
                                       final.status.message()));
    }
  }
  return outputs;
}

const char* FinishReason(const RunOutput& out) {
  return out.final->outcome == convoy::Outcome::kCompleteStop ? "stop" : "length";
}

bool ParseIds(const std::string& text, std::vector<int32_t>* out) {
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) return false;
    out->push_back(id);
  }
  return true;
}

// The output as text, special tokens left out (as the server's responses carry it).
std::string OutputText(const convoy::Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  absl::StatusOr<std::string> text = tokenizer.Decode(ids, /*skip_special=*/true);
  return text.ok() ? *std::move(text) : absl::StrCat("(", text.status().message(), ")");
}

}  // namespace

int main(int argc, char** argv) {
  convoy::cli::ParsedFlags parsed;
  if (int exit_code = convoy::cli::Parse(argc, argv, kCommandLine, &parsed); exit_code >= 0) {
    return exit_code;
  }
  const std::vector<std::string>& id_prompts = parsed.values["token_ids"];
  const std::vector<std::string>& text_prompts = parsed.values["prompt"];
  const std::vector<std::string>& chat_prompts = parsed.values["chat"];

  const std::string model_dir = absl::GetFlag(FLAGS_model);
  if (model_dir.empty()) return Fail("--model DIR is required");
  if (id_prompts.empty() && text_prompts.empty() && chat_prompts.empty()) {
    return Fail("give at least one prompt: --token-ids 1,2,3, --prompt TEXT or --chat TEXT");
  }
  if (parsed.specified.count("system") > 0 && chat_prompts.empty()) {
    return Fail("--system goes with --chat");
  }

  convoy::SamplingParams sampling;
  sampling.temperature = absl::GetFlag(FLAGS_temperature);
  sampling.top_k = absl::GetFlag(FLAGS_top_k);
  sampling.top_p = absl::GetFlag(FLAGS_top_p);
  sampling.seed = absl::GetFlag(FLAGS_seed);
  sampling.num_top_logprobs = absl::GetFlag(FLAGS_top_logprobs);
  std::vector<int32_t> stops;
  if (!ParseIds(absl::GetFlag(FLAGS_stop_token_ids), &stops)) {
    return Fail("--stop-token-ids must be comma-separated integers");
  }

  std::vector<std::vector<int32_t>> id_lists;
  for (const std::string& text : id_prompts) {
    if (!ParseIds(text, &id_lists.emplace_back())) {
      return Fail(absl::StrFormat("--token-ids '%s' must be comma-separated integers", text));
    }
  }

  convoy::CpuExecutorOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_mb) << 20;
  options.block_size = absl::GetFlag(FLAGS_block_size);
  const std::string format_error = convoy::cli::SetCpuFormats(
      absl::GetFlag(FLAGS_weights), absl::GetFlag(FLAGS_kv_dtype), &options);
  if (!format_error.empty()) return Fail(format_error);

  const auto t0 = std::chrono::steady_clock::now();
  auto weights = convoy::ModelWeights::Load(model_dir);
  if (!weights.ok()) return Fail(std::string(weights.status().message()));
  auto executor = convoy::CpuExecutor::Create(**weights, options);
  if (!executor.ok()) return Fail(std::string(executor.status().message()));
  absl::StatusOr<std::unique_ptr<convoy::Tokenizer>> tokenizer =
      convoy::LoadModelTokenizer(**weights);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
  std::optional<convoy::ChatTemplate> chat_template;
  if (!chat_prompts.empty()) {
    absl::StatusOr<std::optional<std::string>> source =
        convoy::LoadModelChatTemplateSource(**weights);
    if (!source.ok()) return Fail(std::string(source.status().message()));
    if (!*source) return Fail("--chat: the model has no chat template; use --prompt");
    absl::StatusOr<convoy::ChatTemplate> parsed_template = convoy::ChatTemplate::Parse(**source);
    if (!parsed_template.ok()) {
      return Fail(absl::StrCat("--chat: the model's chat template cannot be rendered: ",
                               parsed_template.status().message()));
    }
    chat_template = *std::move(parsed_template);
  }
  if (*tokenizer == nullptr &&
      id_lists.size() != id_prompts.size() + text_prompts.size() + chat_prompts.size()) {
    return Fail("--prompt and --chat need a model with a tokenizer; use --token-ids");
  }
  weights->reset();

  // Every prompt as ids: token ids as given, text through the tokenizer, chat through the
  // template. Text and chat prompts also stop at the tokenizer's end of sequence.
  std::vector<RunRequest> requests;
  std::vector<bool> is_text;
  const auto add = [&](std::vector<int32_t> ids, bool text) {
    RunRequest r;
    r.prompt = std::move(ids);
    r.max_tokens = absl::GetFlag(FLAGS_max_tokens);
    r.sampling = sampling;
    r.stop_token_ids = stops;
    if (text) {
      for (int32_t id : (*executor)->model_config().EndOfGenerationIds((*tokenizer)->eos_id())) {
        r.stop_token_ids.push_back(id);
      }
    }
    requests.push_back(std::move(r));
    is_text.push_back(text);
  };
  for (std::vector<int32_t>& ids : id_lists) add(std::move(ids), false);
  for (const std::string& text : text_prompts) {
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text, /*add_special=*/true);
    if (!ids.ok()) return Fail(absl::StrCat("--prompt: ", ids.status().message()));
    add(*std::move(ids), true);
  }
  for (const std::string& text : chat_prompts) {
    std::vector<convoy::ChatMessage> messages;
    if (parsed.specified.count("system") > 0) {
      messages.push_back({"system", absl::GetFlag(FLAGS_system)});
    }
    messages.push_back({"user", text});
    absl::StatusOr<std::vector<int32_t>> ids =
        convoy::EncodeChatPrompt(*chat_template, **tokenizer, messages);
    if (!ids.ok()) return Fail(absl::StrCat("--chat: ", ids.status().message()));
    add(*std::move(ids), true);
  }
  const auto t1 = std::chrono::steady_clock::now();

  convoy::SchedulerStats stats;
  absl::StatusOr<std::vector<RunOutput>> outputs =
      RunAll(executor->get(), requests, absl::GetFlag(FLAGS_prefill_chunk), &stats);
  if (!outputs.ok()) return Fail(std::string(outputs.status().message()));
  const auto t2 = std::chrono::steady_clock::now();

  int64_t generated = 0;
  for (size_t i = 0; i < outputs->size(); ++i) {
    const RunOutput& out = (*outputs)[i];
    generated += static_cast<int64_t>(out.token_ids.size());
    if (absl::GetFlag(FLAGS_json)) {
      nlohmann::json j;
      j["prompt_index"] = i;
      j["prompt_token_ids"] = requests[i].prompt;
      j["token_ids"] = out.token_ids;
      if (*tokenizer != nullptr) j["text"] = OutputText(**tokenizer, out.token_ids);
      j["logprobs"] = out.logprobs;
      j["finish_reason"] = FinishReason(out);
      if (!out.top_logprobs.empty()) {
        nlohmann::json tops = nlohmann::json::array();
        for (const auto& step : out.top_logprobs) {
          nlohmann::json entry = nlohmann::json::array();
          for (const auto& t : step)
            entry.push_back({{"token_id", t.token}, {"logprob", t.logprob}});
          tops.push_back(entry);
        }
        j["top_logprobs"] = tops;
      }
      std::cout << j.dump() << "\n";
    } else if (is_text[i]) {
      std::cout << absl::StrFormat("prompt %d: %s  [%s]\n", i,
                                   OutputText(**tokenizer, out.token_ids), FinishReason(out));
    } else {
      std::cout << absl::StrFormat("prompt %d: %s  [%s]\n", i, absl::StrJoin(out.token_ids, " "),
                                   FinishReason(out));
    }
  }
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double gen_s = std::chrono::duration<double>(t2 - t1).count();
  std::cerr << absl::StrFormat(
      "convoy-run: loaded in %.2f s; %d prompts, %d tokens generated in %.3f s (%.1f tokens/s), "
      "%d steps, padding %.1f%% of tokens\n",
      load_s, outputs->size(), generated, gen_s, generated / gen_s, stats.steps,
      100.0 * stats.padded_tokens / std::max<int64_t>(1, stats.real_tokens + stats.padded_tokens));
  return 0;
}
