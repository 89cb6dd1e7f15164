// convoy-mkmodel: writes a Llama model directory with random weights (config.json + safetensors).
//   convoy-mkmodel --out DIR [--preset tiny|tinyllama|llama-3.2-1b|llama-3.1-8b]
//                  [--vocab-size N --hidden-size N --intermediate-size N --layers N --heads N
//                   --kv-heads N --head-dim N --max-position N --rope-theta X --tie-embeddings]
//                  [--dtype f32|f16|bf16] [--seed S] [--shards N]
// Flags may be spelled with '-' or '_'. Bad flags: a message on stderr and exit code 2.
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "model/model_config.h"
#include "model/random_model.h"
#include "tools/cli_flags.h"

ABSL_FLAG(std::string, out, "", "Directory to write (created if needed); required");
ABSL_FLAG(std::string, preset, "tiny", "tiny, tinyllama, llama-3.2-1b or llama-3.1-8b");
ABSL_FLAG(int64_t, vocab_size, 0,
          "Vocabulary size (overrides the preset; bos/eos become 1/2 when the preset's ids do not "
          "fit)");
ABSL_FLAG(int64_t, hidden_size, 0, "Hidden size (overrides the preset)");
ABSL_FLAG(int64_t, intermediate_size, 0, "MLP intermediate size (overrides the preset)");
ABSL_FLAG(int64_t, layers, 0, "Number of layers (overrides the preset)");
ABSL_FLAG(int64_t, heads, 0, "Attention heads (overrides the preset)");
ABSL_FLAG(int64_t, kv_heads, 0, "Key/value heads (overrides the preset)");
ABSL_FLAG(int64_t, head_dim, 0, "Head dimension; by default hidden size / heads");
ABSL_FLAG(int64_t, max_position, 0, "max_position_embeddings (overrides the preset)");
ABSL_FLAG(double, rope_theta, 0, "RoPE base (overrides the preset)");
ABSL_FLAG(bool, tie_embeddings, false, "Tie lm_head to the embeddings (overrides the preset)");
ABSL_FLAG(std::string, dtype, "f32", "Weight dtype: f32, f16 or bf16");
ABSL_FLAG(uint64_t, seed, 0, "Random seed; the same seed gives the same bytes");
ABSL_FLAG(int32_t, shards, 1, "Number of safetensors files (> 1 writes an index)");

namespace {

const convoy::cli::CommandLine kCommandLine = {
    "convoy-mkmodel",
    "convoy-mkmodel --out DIR [--preset NAME] [--vocab-size N --hidden-size N "
    "--intermediate-size N\n"
    "               --layers N --heads N --kv-heads N --head-dim N --max-position N "
    "--rope-theta X\n"
    "               --tie-embeddings] [--dtype f32|f16|bf16] [--seed S] [--shards N]\n\n"
    "Writes a Llama model directory (config.json + safetensors) with random weights.",
    {"out", "preset", "vocab_size", "hidden_size", "intermediate_size", "layers", "heads",
     "kv_heads", "head_dim", "max_position", "rope_theta", "tie_embeddings", "dtype", "seed",
     "shards"},
    {}};

int BadUsage(const std::string& message) { return convoy::cli::BadUsage(kCommandLine, message); }

bool PresetConfig(const std::string& name, convoy::ModelConfig& config) {
  config = convoy::ModelConfig();
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 10000.0;
  config.max_position_embeddings = 2048;
  if (name == "tiny") {
    config.vocab_size = 512;
    config.hidden_size = 128;
    config.intermediate_size = 352;
    config.num_hidden_layers = 4;
    config.num_attention_heads = 4;
    config.num_key_value_heads = 2;
  } else if (name == "tinyllama") {
    config.vocab_size = 32000;
    config.hidden_size = 2048;
    config.intermediate_size = 5632;
    config.num_hidden_layers = 22;
    config.num_attention_heads = 32;
    config.num_key_value_heads = 4;
  } else if (name == "llama-3.2-1b" || name == "llama-3.1-8b") {
    const bool small = name == "llama-3.2-1b";
    config.vocab_size = 128256;
    config.hidden_size = small ? 2048 : 4096;
    config.intermediate_size = small ? 8192 : 14336;
    config.num_hidden_layers = small ? 16 : 32;
    config.num_attention_heads = 32;
    config.num_key_value_heads = 8;
    config.max_position_embeddings = 131072;
    config.rope_theta = 500000.0;
    config.tie_word_embeddings = small;
    config.rope_scaling.rope_type = "llama3";
    config.rope_scaling.factor = small ? 32.0 : 8.0;
    config.rope_scaling.low_freq_factor = 1.0;
    config.rope_scaling.high_freq_factor = 4.0;
    config.rope_scaling.original_max_position_embeddings = 8192;
    config.bos_token_id = 128000;
    config.eos_token_id = 128001;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  convoy::cli::ParsedFlags parsed;
  if (int exit_code = convoy::cli::Parse(argc, argv, kCommandLine, &parsed); exit_code >= 0) {
    return exit_code;
  }
  const std::set<std::string>& specified = parsed.specified;

  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return BadUsage("--out DIR is required");
  convoy::ModelConfig config;
  const std::string preset = absl::GetFlag(FLAGS_preset);
  if (!PresetConfig(preset, config)) {
    return BadUsage(absl::StrCat("unknown --preset '", preset,
                                 "', expected tiny, tinyllama, llama-3.2-1b or llama-3.1-8b"));
  }
  auto override_int = [&](const char* flag_name, const absl::Flag<int64_t>& flag, int64_t& field) {
    if (specified.count(flag_name)) field = absl::GetFlag(flag);
  };
  override_int("vocab_size", FLAGS_vocab_size, config.vocab_size);
  override_int("hidden_size", FLAGS_hidden_size, config.hidden_size);
  override_int("intermediate_size", FLAGS_intermediate_size, config.intermediate_size);
  override_int("layers", FLAGS_layers, config.num_hidden_layers);
  override_int("heads", FLAGS_heads, config.num_attention_heads);
  override_int("kv_heads", FLAGS_kv_heads, config.num_key_value_heads);
  override_int("max_position", FLAGS_max_position, config.max_position_embeddings);
  if (specified.count("rope_theta")) config.rope_theta = absl::GetFlag(FLAGS_rope_theta);
  if (specified.count("tie_embeddings")) {
    config.tie_word_embeddings = absl::GetFlag(FLAGS_tie_embeddings);
  }
  // A preset's special token ids may not fit a smaller vocabulary; fall back to Llama 2's.
  if (config.bos_token_id >= config.vocab_size || config.eos_token_id >= config.vocab_size) {
    config.bos_token_id = 1;
    config.eos_token_id = 2;
  }
  if (specified.count("head_dim")) {
    config.head_dim = absl::GetFlag(FLAGS_head_dim);
  } else if (config.num_attention_heads > 0 &&
             config.hidden_size % config.num_attention_heads == 0) {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  } else {
    return BadUsage(
        absl::StrFormat("--hidden-size %d is not a multiple of --heads %d; give --head-dim",
                        config.hidden_size, config.num_attention_heads));
  }

  convoy::RandomModelOptions options;
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "f32") {
    options.dtype = convoy::DType::kF32;
  } else if (dtype == "f16") {
    options.dtype = convoy::DType::kF16;
  } else if (dtype == "bf16") {
    options.dtype = convoy::DType::kBF16;
  } else {
    return BadUsage(absl::StrCat("invalid --dtype '", dtype, "', expected f32, f16 or bf16"));
  }
  config.torch_dtype = options.dtype;
  if (absl::Status valid = config.Validate(); !valid.ok()) {
    return BadUsage(absl::StrCat("invalid model shape: ", valid.message()));
  }
  options.config = config;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.num_shards = absl::GetFlag(FLAGS_shards);
  if (options.num_shards < 1) {
    return BadUsage(absl::StrFormat("--shards must be at least 1, found %d", options.num_shards));
  }

  if (absl::Status status = convoy::WriteRandomModel(out, options); !status.ok()) {
    std::fprintf(stderr, "convoy-mkmodel: %s\n", status.ToString().c_str());
    return status.code() == absl::StatusCode::kInvalidArgument ? convoy::cli::kBadUsage : 1;
  }
  const int64_t parameters = config.NumParameters();
  absl::PrintF(
      "convoy-mkmodel: %s: %d parameters (%d layers, hidden %d, vocab %d%s), %d bytes of %s "
      "weights in %d file(s), seed %d, in %s\n",
      preset, parameters, config.num_hidden_layers, config.hidden_size, config.vocab_size,
      config.tie_word_embeddings ? ", tied" : "", parameters * convoy::DTypeSize(options.dtype),
      convoy::DTypeName(options.dtype), options.num_shards, options.seed, out);
  return 0;
}
