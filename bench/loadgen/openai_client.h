// The OpenAI protocol's client: each request a streamed POST /v1/completions over HTTP/1.1 on its
// own connection (opened when the request starts, closed when it ends), its server-sent events
// parsed as they arrive (openai_encoding.h, sse_parser.h). Boost.Beast on Boost.Asio: a few io
// threads serve every connection; nothing blocks on one.
//
// Each event that carries output counts as one token arrival (convoyd sends one event per
// message of new tokens, and several tokens in one event when the client reads slowly), and the
// record's output_tokens is the usage's completion_tokens from the end of the stream. A request
// is complete when the stream ended with a finish reason ("length" or "stop") and [DONE]; an
// HTTP error status, an error event, or a stream cut short is a failure.
#ifndef CONVOY_BENCH_LOADGEN_OPENAI_CLIENT_H_
#define CONVOY_BENCH_LOADGEN_OPENAI_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/loadgen/request_client.h"

namespace convoy::bench {

struct OpenAiClientOptions {
  std::string address;  // HOST:PORT of the HTTP server
  std::string model;    // the body's "model"
  // When not empty, every request carries `Authorization: Bearer KEY`.
  std::string api_key;
  std::string path = "/v1/completions";
  int io_threads = 2;
};

// An error when the address does not resolve. Cancellation closes the requests' connections.
absl::StatusOr<std::unique_ptr<RequestClient>> MakeOpenAiClient(const OpenAiClientOptions& options,
                                                                SteadyClock::time_point origin);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_OPENAI_CLIENT_H_
