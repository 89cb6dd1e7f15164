// convoy-run: generates from a model directory in-process, all prompts batched together.
//   convoy-run --model DIR --token-ids 1,2,3 [--token-ids 4,5 ...] --max-tokens 16
//              [--temperature T --top-k K --top-p P --seed S --top-logprobs N] [--json]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/generator.h"
#include "executor/cpu/cpu_executor.h"
#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "tools/cli_flags.h"

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
ABSL_FLAG(std::string, weights, "auto", "Weight format for the matrix products: auto, f32, bf16");

namespace {

const convoy::cli::CommandLine kCommandLine = {
    "convoy-run",
    "convoy-run --model DIR --token-ids 1,2,3 [--token-ids ...] [--max-tokens N]\n"
    "           [--temperature T --top-k K --top-p P --seed S] [--top-logprobs N] [--json]\n\n"
    "Generates from a model directory in-process, every prompt batched together.",
    {"model", "max_tokens", "temperature", "top_k", "top_p", "seed", "top_logprobs",
     "stop_token_ids", "json", "threads", "kv_cache_mb", "block_size", "prefill_chunk", "weights"},
    {"token_ids"}};

int Fail(const std::string& message) { return convoy::cli::BadUsage(kCommandLine, message); }

bool ParseIds(const std::string& text, std::vector<int32_t>* out) {
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) return false;
    out->push_back(id);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  convoy::cli::ParsedFlags parsed;
  if (int exit_code = convoy::cli::Parse(argc, argv, kCommandLine, &parsed); exit_code >= 0) {
    return exit_code;
  }
  const std::vector<std::string>& prompts_text = parsed.values["token_ids"];

  const std::string model_dir = absl::GetFlag(FLAGS_model);
  if (model_dir.empty()) return Fail("--model DIR is required");
  if (prompts_text.empty()) return Fail("give at least one prompt with --token-ids 1,2,3");

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

  std::vector<convoy::GenerationRequest> requests;
  for (const std::string& text : prompts_text) {
    convoy::GenerationRequest r;
    if (!ParseIds(text, &r.prompt)) {
      return Fail(absl::StrFormat("--token-ids '%s' must be comma-separated integers", text));
    }
    r.max_tokens = absl::GetFlag(FLAGS_max_tokens);
    r.sampling = sampling;
    r.stop_token_ids = stops;
    requests.push_back(std::move(r));
  }

  convoy::CpuExecutorOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_mb) << 20;
  options.block_size = absl::GetFlag(FLAGS_block_size);
  const std::string weights_flag = absl::GetFlag(FLAGS_weights);
  if (weights_flag == "f32") {
    options.weight_format = convoy::CpuWeightFormat::kF32;
  } else if (weights_flag == "bf16") {
    options.weight_format = convoy::CpuWeightFormat::kBF16;
  } else if (weights_flag != "auto") {
    return Fail("--weights must be auto, f32 or bf16, got '" + weights_flag + "'");
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto weights = convoy::ModelWeights::Load(model_dir);
  if (!weights.ok()) return Fail(std::string(weights.status().message()));
  auto executor = convoy::CpuExecutor::Create(**weights, options);
  if (!executor.ok()) return Fail(std::string(executor.status().message()));
  weights->reset();
  const auto t1 = std::chrono::steady_clock::now();

  convoy::GeneratorOptions gen_options;
  gen_options.prefill_chunk_tokens = absl::GetFlag(FLAGS_prefill_chunk);
  convoy::Generator generator(executor->get(), gen_options);
  auto outputs = generator.Generate(requests);
  if (!outputs.ok()) return Fail(std::string(outputs.status().message()));
  const auto t2 = std::chrono::steady_clock::now();

  int64_t generated = 0;
  for (size_t i = 0; i < outputs->size(); ++i) {
    const convoy::GenerationOutput& out = (*outputs)[i];
    generated += static_cast<int64_t>(out.token_ids.size());
    if (absl::GetFlag(FLAGS_json)) {
      nlohmann::json j;
      j["prompt_index"] = i;
      j["token_ids"] = out.token_ids;
      j["logprobs"] = out.logprobs;
      j["finish_reason"] = convoy::FinishReasonName(out.finish_reason);
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
    } else {
      std::cout << absl::StrFormat("prompt %d: %s  [%s]\n", i, absl::StrJoin(out.token_ids, " "),
                                   convoy::FinishReasonName(out.finish_reason));
    }
  }
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double gen_s = std::chrono::duration<double>(t2 - t1).count();
  std::cerr << absl::StrFormat(
      "convoy-run: loaded in %.2f s; %d prompts, %d tokens generated in %.3f s (%.1f tokens/s), "
      "%d steps, padding %.1f%% of tokens\n",
      load_s, outputs->size(), generated, gen_s, generated / gen_s, generator.stats().steps,
      100.0 * generator.stats().padded_tokens /
          std::max<int64_t>(1, generator.stats().real_tokens + generator.stats().padded_tokens));
  return 0;
}
