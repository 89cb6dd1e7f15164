// Live reload of the server config: which fields a running server may take from a new file, and
// how the config in force is shown (convoy info, the metrics).
//
// Taken live (the batcher's knobs, applied on the engine thread between steps; the request
// defaults and limits; the API keys; the drain timeout):
//   scheduler.{max_batch_size, max_queue_delay_microseconds, preferred_batch_size,
//     max_num_batched_tokens, prefill_chunk_size, length_grouping_window, default_priority_level,
//     max_queue_size, default_timeout_microseconds, priority_aging_microseconds,
//     priority_queue_policy}, request_defaults, request_limits,
//     frontend.drain_timeout_microseconds,
//   frontend.api_key, frontend.api_key_file.
// Every other field (the model, ports and addresses, TLS files, reflection, the KV cache, the
// executor, the metrics endpoint, scheduler.mode and priority_levels) needs a restart: a reload
// that changes one is refused whole.
#ifndef CONVOY_CONFIG_CONFIG_RELOAD_H_
#define CONVOY_CONFIG_CONFIG_RELOAD_H_

#include <string>
#include <vector>

#include "convoy/v1/server_config.pb.h"

namespace convoy {

// The fields that differ between `current` and `next` (both filled and valid) and need a
// restart, as paths ("frontend.port", "kv_cache.memory_budget_bytes"), in schema order. Empty:
// `next` may be applied live.
std::vector<std::string> FieldsNeedingRestart(const v1::ServerConfig& current,
                                              const v1::ServerConfig& next);

// `config` in protobuf text format with every API key's secret replaced by "<redacted>".
std::string EffectiveConfigText(const v1::ServerConfig& config);

// A stable hash of `text` (64-bit FNV-1a) as 16 hex digits.
std::string ConfigHash(const std::string& text);

}  // namespace convoy

#endif  // CONVOY_CONFIG_CONFIG_RELOAD_H_
