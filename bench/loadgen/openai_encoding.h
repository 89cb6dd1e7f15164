// convoy-bench's requests as OpenAI /v1/completions bodies, and what each server-sent event of a
// streamed answer says. The prompt goes as its token ids, so that the server sees the same prompt
// as over the other protocols.
#ifndef CONVOY_BENCH_LOADGEN_OPENAI_ENCODING_H_
#define CONVOY_BENCH_LOADGEN_OPENAI_ENCODING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "bench/loadgen/request_source.h"

namespace convoy::bench {

// {"model", "prompt": [ids], "max_tokens", "temperature", "seed", "stream": true,
//  "stream_options": {"include_usage": true}, "user": "bench-<index>"} and "priority" (convoyd's
// extension) when it is not 0. The seed's 64 bits go as a signed integer (OpenAI's type), which
// convoyd reads back to the same bits.
std::string BuildOpenAiCompletionBody(const PlannedRequest& planned, const std::string& model);

// One event of a streamed completion.
struct OpenAiStreamEvent {
  enum class Kind {
    kChunk,      // a completion chunk (output, the finish reason, and/or the usage)
    kDone,       // data: [DONE]
    kError,      // {"error": {...}}: `error` holds its message
    kMalformed,  // not JSON, or JSON of another shape: `error` says what
  };
  Kind kind = Kind::kMalformed;
  // A choice carrying output: text (possibly empty, when the server holds back half a
  // character) without a finish reason, or any non-empty text. One event may carry several
  // tokens; the protocol does not say how many.
  bool output = false;
  std::string finish_reason;       // the choice's, when it has one
  int64_t completion_tokens = -1;  // usage.completion_tokens; -1 when absent
  std::string error;
};
OpenAiStreamEvent ParseOpenAiStreamEvent(absl::string_view data);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_OPENAI_ENCODING_H_
