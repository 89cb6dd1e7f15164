// Choosing and building convoyd's executor from the config: the CUDA executor when the config asks
// for it, or for AUTO when the build has it and a GPU is usable; the fake device when asked for;
// the CPU executor otherwise.
#ifndef CONVOY_DAEMON_EXECUTOR_FACTORY_H_
#define CONVOY_DAEMON_EXECUTOR_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "convoy/v1/server_config.pb.h"
#include "executor/executor.h"
#include "model/model_weights.h"

namespace convoy {

struct BuiltExecutor {
  std::unique_ptr<Executor> executor;
  std::string name;  // "cpu", "cuda" or "fake"
  // How the weights are kept, for the load log line: "native (GGUF blocks), 92.0 MiB".
  std::string weights;
};

// `config` has its defaults filled. FAILED_PRECONDITION when CUDA is asked for and cannot be used;
// INVALID_ARGUMENT when the executor cannot store K and V in kv_cache.dtype.
// `end_of_generation_ids`: the tokens that end a request (the fake device never samples them).
absl::StatusOr<BuiltExecutor> CreateExecutor(const ModelWeights& weights,
                                             const v1::ServerConfig& config,
                                             const std::vector<int32_t>& end_of_generation_ids);

}  // namespace convoy

#endif  // CONVOY_DAEMON_EXECUTOR_FACTORY_H_
