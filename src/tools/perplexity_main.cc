// convoy-perplexity: a model's perplexity over a text file, computed the way llama.cpp's
// llama-perplexity computes it, so that the two engines can be compared on the same file and text.
//   convoy-perplexity --model FILE.gguf|DIR --text FILE [--ctx 512] [--weights
//   auto|f32|bf16|native]
//                     [--kv-dtype f32|bf16|int8]
//
// The text is tokenized whole (no BOS added) and cut into chunks of --ctx tokens; a chunk that
// does not fill --ctx at the end is dropped. Where the tokenizer adds BOS to a sequence, each
// chunk's first token is replaced by BOS. Each chunk is one prompt row of one step (its logits at
// every position returned), and the second half of its positions is scored: the negative log
// likelihood of the token that follows each position from --ctx/2 to --ctx-2. The perplexity is
// exp of their mean, with its standard error from the per-token spread (as llama-perplexity
// states it). Prints one line per chunk (the running estimate) and a final JSON line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_executor.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "tools/cli_flags.h"
#include "tools/cpu_format_flags.h"

ABSL_FLAG(std::string, model, "", "Model: a directory (config.json + safetensors) or a .gguf file");
ABSL_FLAG(std::string, text, "", "The text file to score (UTF-8)");
ABSL_FLAG(int32_t, ctx, 512, "Tokens per chunk; the second half of each chunk is scored");
ABSL_FLAG(int32_t, max_chunks, 0, "Score at most this many chunks; 0 for all");
ABSL_FLAG(int32_t, threads, 0, "CPU threads; 0 for every core");
ABSL_FLAG(std::string, weights, "auto",
          "Weight format for the matrix products: auto, f32, bf16, native (quantized blocks)");
ABSL_FLAG(std::string, kv_dtype, "f32", "Type the KV cache stores K and V in: f32, bf16, int8");

namespace {

const convoy::cli::CommandLine kCommandLine = {
    "convoy-perplexity",
    "convoy-perplexity --model DIR|FILE.gguf --text FILE [--ctx 512] [--max-chunks N]\n"
    "                  [--weights auto|f32|bf16|native] [--kv-dtype f32|bf16|int8]\n"
    "                  [--threads N]\n\n"
    "A model's perplexity over a text file, in chunks of --ctx tokens with the second half of\n"
    "each scored, as llama.cpp's llama-perplexity computes it.",
    {"model", "text", "ctx", "max_chunks", "threads", "weights", "kv_dtype"},
    {}};

int Fail(const std::string& message) { return convoy::cli::BadUsage(kCommandLine, message); }

// The negative log likelihood of `next` under `logits` (one position's), in double.
double NegativeLogLikelihood(const float* logits, int32_t vocab, int32_t next) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int32_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - max_logit);
  return std::log(sum) - (static_cast<double>(logits[next]) - max_logit);
}

}  // namespace

int main(int argc, char** argv) {
  convoy::cli::ParsedFlags parsed;
  if (int exit_code = convoy::cli::Parse(argc, argv, kCommandLine, &parsed); exit_code >= 0) {
    return exit_code;
  }
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string text_path = absl::GetFlag(FLAGS_text);
  const int32_t ctx = absl::GetFlag(FLAGS_ctx);
  if (model_path.empty()) return Fail("--model is required");
  if (text_path.empty()) return Fail("--text is required");
  if (ctx < 4) return Fail(absl::StrCat("--ctx must be at least 4, got ", ctx));

  convoy::CpuExecutorOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  const std::string format_error = convoy::cli::SetCpuFormats(
      absl::GetFlag(FLAGS_weights), absl::GetFlag(FLAGS_kv_dtype), &options);
  if (!format_error.empty()) return Fail(format_error);

  std::ifstream in(text_path, std::ios::binary);
  if (!in) return Fail("--text: cannot read '" + text_path + "'");
  std::stringstream text;
  text << in.rdbuf();

  auto weights = convoy::ModelWeights::Load(model_path);
  if (!weights.ok()) return Fail(std::string(weights.status().message()));
  absl::StatusOr<std::unique_ptr<convoy::Tokenizer>> tokenizer =
      convoy::LoadModelTokenizer(**weights);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
  if (*tokenizer == nullptr) return Fail("the model has no tokenizer");
  const convoy::Tokenizer& tok = **tokenizer;
  absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(text.str(), /*add_special=*/false);
  if (!ids.ok()) return Fail(absl::StrCat("--text: ", ids.status().message()));

  // One chunk per step: its blocks are [0, blocks_per_chunk), written over by every chunk.
  options.block_size = 16;
  const int32_t blocks_per_chunk = (ctx + options.block_size - 1) / options.block_size;
  auto executor = convoy::CpuExecutor::Create(**weights, options);
  if (!executor.ok()) return Fail(std::string(executor.status().message()));
  if ((*executor)->kv_spec().num_blocks < blocks_per_chunk) {
    return Fail(absl::StrCat("--ctx ", ctx, " needs ", blocks_per_chunk,
                             " KV blocks; the executor has ", (*executor)->kv_spec().num_blocks));
  }
  weights->reset();
  const int32_t vocab = (*executor)->model_config().vocab_size;

  int64_t num_chunks = static_cast<int64_t>(ids->size()) / ctx;
  if (absl::GetFlag(FLAGS_max_chunks) > 0) {
    num_chunks = std::min<int64_t>(num_chunks, absl::GetFlag(FLAGS_max_chunks));
  }
  if (num_chunks == 0) {
    return Fail(absl::StrCat("--text has ", ids->size(), " tokens, fewer than --ctx ", ctx));
  }
  std::fprintf(stderr, "%zu tokens, %lld chunks of %d, weights %s, KV cache %s\n", ids->size(),
               static_cast<long long>(num_chunks), ctx,
               convoy::CpuWeightFormatName((*executor)->weight_format()),
               convoy::KvDtypeName((*executor)->kv_spec().dtype));

  const int32_t first = ctx / 2;
  double nll_sum = 0, nll_sq_sum = 0;
  int64_t scored = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < num_chunks; ++c) {
    convoy::StepRow row;
    row.seq_id = c;
    row.token_ids.assign(ids->begin() + c * ctx, ids->begin() + (c + 1) * ctx);
    if (tok.add_bos() && tok.bos_id()) row.token_ids[0] = *tok.bos_id();
    for (int32_t b = 0; b < blocks_per_chunk; ++b) row.block_table.push_back(b);
    row.sample = false;
    row.return_logits = true;
    convoy::StepPlan plan;
    plan.rows.push_back(std::move(row));
    absl::StatusOr<convoy::StepResult> result = (*executor)->Step(plan);
    if (!result.ok()) return Fail(absl::StrCat("chunk ", c, ": ", result.status().message()));
    const convoy::RowResult& out = result->rows.at(0);
    if (!out.status.ok()) return Fail(absl::StrCat("chunk ", c, ": ", out.status.message()));
    for (int32_t j = first; j < ctx - 1; ++j) {
      const double nll = NegativeLogLikelihood(out.logits.data() + static_cast<size_t>(j) * vocab,
                                               vocab, (*ids)[c * ctx + j + 1]);
      nll_sum += nll;
      nll_sq_sum += nll * nll;
      ++scored;
    }
    std::fprintf(stderr, "[%lld] %.4f\n", static_cast<long long>(c + 1),
                 std::exp(nll_sum / static_cast<double>(scored)));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mean = nll_sum / static_cast<double>(scored);
  const double variance = std::max(0.0, nll_sq_sum / static_cast<double>(scored) - mean * mean);
  const double ppl = std::exp(mean);
  const double ppl_error = ppl * std::sqrt(variance / static_cast<double>(scored - 1));
  nlohmann::json line = {{"perplexity", ppl},
                         {"perplexity_error", ppl_error},
                         {"tokens", ids->size()},
                         {"chunks", num_chunks},
                         {"ctx", ctx},
                         {"scored_tokens", scored},
                         {"weights", convoy::CpuWeightFormatName((*executor)->weight_format())},
                         {"kv_dtype", convoy::KvDtypeName((*executor)->kv_spec().dtype)},
                         {"seconds", seconds}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
