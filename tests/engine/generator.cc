#include "engine/generator.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "kv/block_table.h"

namespace convoy {

const char* FinishReasonName(FinishReason reason) {
  return reason == FinishReason::kStop ? "stop" : "length";
}

Generator::Generator(Executor* executor, const GeneratorOptions& options)
    : executor_(executor), options_(options), allocator_(executor->kv_spec().num_blocks) {}

namespace {

struct Sequence {
  const GenerationRequest* request;
  BlockTable table;
  int32_t computed = 0;  // tokens whose K and V are in the cache
  bool finished = false;
  GenerationOutput output;

  int32_t prompt_len() const { return static_cast<int32_t>(request->prompt.size()); }
};

}  // namespace

absl::StatusOr<std::vector<GenerationOutput>> Generator::Generate(
    const std::vector<GenerationRequest>& requests) {
  const ModelConfig& model = executor_->model_config();
  const int32_t block_size = executor_->kv_spec().block_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrFormat("request %d: %s", i, what));
    };
    if (r.prompt.empty()) return error("prompt is empty");
    for (size_t j = 0; j < r.prompt.size(); ++j) {
      if (r.prompt[j] < 0 || r.prompt[j] >= model.vocab_size) {
        return error(absl::StrFormat("prompt[%d] = %d is outside the vocabulary [0, %d)", j,
                                     r.prompt[j], model.vocab_size));
      }
    }
    if (r.max_tokens < 1)
      return error(absl::StrFormat("max_tokens must be >= 1, got %d", r.max_tokens));
    const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens - 1;
    if (total > model.max_position_embeddings) {
      return error(
          absl::StrFormat("prompt of %d tokens plus max_tokens %d exceeds the context of %d",
                          r.prompt.size(), r.max_tokens, model.max_position_embeddings));
    }
    RETURN_IF_ERROR(ValidateSamplingParams(r.sampling, static_cast<int32_t>(model.vocab_size)));
  }

  std::vector<Sequence> seqs;
  seqs.reserve(requests.size());
  for (const GenerationRequest& r : requests) {
    seqs.push_back({&r, BlockTable(block_size), 0, false, GenerationOutput{}});
  }
  absl::Cleanup release = [&] {
    for (Sequence& s : seqs) s.table.ReleaseAll(&allocator_);
  };

  while (true) {
    StepPlan plan;
    std::vector<Sequence*> in_step;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence& s = seqs[i];
      if (s.finished) continue;
      StepRow row;
      row.seq_id = static_cast<int64_t>(i);
      row.start_pos = s.computed;
      if (s.computed < s.prompt_len()) {
        int32_t n = s.prompt_len() - s.computed;
        if (options_.prefill_chunk_tokens > 0) n = std::min(n, options_.prefill_chunk_tokens);
        row.token_ids.assign(s.request->prompt.begin() + s.computed,
                             s.request->prompt.begin() + s.computed + n);
        row.sample = s.computed + n == s.prompt_len();
      } else {
        row.token_ids = {s.output.token_ids.back()};
      }
      RETURN_IF_ERROR(s.table.Reserve(row.start_pos + row.token_ids.size(), &allocator_));
      row.block_table = s.table.blocks();
      row.sampling = s.request->sampling;
      row.sample_index = static_cast<int64_t>(s.output.token_ids.size());
      plan.rows.push_back(std::move(row));
      in_step.push_back(&s);
    }
    if (plan.rows.empty()) break;

    ASSIGN_OR_RETURN(StepResult result, executor_->Step(plan));
    ++stats_.steps;
    stats_.real_tokens += result.real_tokens;
    stats_.padded_tokens += result.padded_tokens;
    for (size_t k = 0; k < in_step.size(); ++k) {
      Sequence& s = *in_step[k];
      const StepRow& row = plan.rows[k];
      const RowResult& out = result.rows[k];
      s.computed += static_cast<int32_t>(row.token_ids.size());
      if (!row.sample) continue;
      s.output.token_ids.push_back(out.token);
      s.output.logprobs.push_back(out.logprob);
      if (s.request->sampling.num_top_logprobs > 0)
        s.output.top_logprobs.push_back(out.top_logprobs);
      const auto& stops = s.request->stop_token_ids;
      if (std::find(stops.begin(), stops.end(), out.token) != stops.end()) {
        s.output.finish_reason = FinishReason::kStop;
        s.finished = true;
      } else if (static_cast<int32_t>(s.output.token_ids.size()) >= s.request->max_tokens) {
        s.output.finish_reason = FinishReason::kLength;
        s.finished = true;
      }
      if (s.finished) s.table.ReleaseAll(&allocator_);
    }
  }

  std::vector<GenerationOutput> outputs;
  outputs.reserve(seqs.size());
  for (Sequence& s : seqs) outputs.push_back(std::move(s.output));
  return outputs;
}

}  // namespace convoy
