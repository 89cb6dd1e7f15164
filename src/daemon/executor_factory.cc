#include "daemon/executor_factory.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "executor/cpu/cpu_executor.h"
#include "executor/cpu/gemv_bf16.h"
#include "executor/cpu/linear.h"
#include "executor/fake/fake_device_executor.h"
#include "spdlog/spdlog.h"
#ifdef CONVOY_HAVE_CUDA_EXECUTOR
#include "executor/cuda/cuda_executor.h"
#endif

namespace convoy {
namespace {

bool UseCuda([[maybe_unused]] v1::ExecutorConfig::Device device) {
#ifdef CONVOY_HAVE_CUDA_EXECUTOR
  if (device == v1::ExecutorConfig::CUDA) return true;
  return device == v1::ExecutorConfig::AUTO && CudaDeviceAvailable();
#else
  return false;
#endif
}

}  // namespace

absl::StatusOr<BuiltExecutor> CreateExecutor(const ModelWeights& weights,
                                             const v1::ServerConfig& config,
                                             const std::vector<int32_t>& end_of_generation_ids) {
  const v1::ExecutorConfig::Device device = config.executor().device();
  if (device == v1::ExecutorConfig::FAKE) {
    FakeDeviceOptions options;
    options.step_time = absl::Microseconds(config.executor().fake_step_microseconds());
    options.time_per_token = absl::Microseconds(config.executor().fake_microseconds_per_token());
    options.block_size = static_cast<int32_t>(config.kv_cache().block_size());
    options.kv_cache_bytes = static_cast<int64_t>(config.kv_cache().memory_budget_bytes());
    options.never_sample = end_of_generation_ids;
    BuiltExecutor built;
    ASSIGN_OR_RETURN(built.executor, FakeDeviceExecutor::Create(weights.config(), options));
    built.name = "fake";
    built.weights =
        absl::StrFormat("none (fake device, %s a step)", absl::FormatDuration(options.step_time));
    return built;
  }
#ifndef CONVOY_HAVE_CUDA_EXECUTOR
  if (device == v1::ExecutorConfig::CUDA) {
    return absl::FailedPreconditionError(
        "executor.device: CUDA, but this build has no CUDA executor (-DCONVOY_ENABLE_CUDA)");
  }
#endif
  BuiltExecutor built;
  if (UseCuda(device)) {
#ifdef CONVOY_HAVE_CUDA_EXECUTOR
    if (!CudaDeviceAvailable()) {
      return absl::FailedPreconditionError("executor.device: CUDA, but no usable GPU was found");
    }
    if (config.kv_cache().dtype() != v1::KvCacheConfig::DTYPE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kv_cache.dtype: %s, but the CUDA executor keeps K and V in the model's 16-bit type; "
          "leave kv_cache.dtype unset",
          v1::KvCacheConfig::Dtype_Name(config.kv_cache().dtype())));
    }
    CudaExecutorOptions options;
    options.block_size = static_cast<int32_t>(config.kv_cache().block_size());
    options.gpu_memory_fraction = config.executor().gpu_memory_fraction();
    // A step's buffers hold what the scheduler may put in one step: its token budget (which
    // counts padding, so it bounds the packed tokens too) and its batch.
    const v1::SchedulerConfig& scheduler = config.scheduler();
    options.max_tokens_per_step = static_cast<int32_t>(
        std::min<uint64_t>(65535, std::max<uint64_t>(scheduler.max_num_batched_tokens(), 1)));
    options.max_rows_per_step = static_cast<int32_t>(
        std::min<uint64_t>(65535, std::max<uint64_t>(scheduler.max_batch_size(), 1)));
    options.max_logit_rows = std::max(options.max_logit_rows, options.max_rows_per_step);
    ASSIGN_OR_RETURN(built.executor, CudaExecutor::Create(weights, options));
    built.name = "cuda";
    return built;
#endif
  }
  CpuExecutorOptions options;
  options.num_threads = static_cast<int>(config.executor().cpu_threads());
  options.skip_padding = config.executor().skip_padding();
  options.batch_invariant = config.executor().batch_invariant();
  options.kv_cache_bytes = static_cast<int64_t>(config.kv_cache().memory_budget_bytes());
  options.block_size = static_cast<int32_t>(config.kv_cache().block_size());
  switch (config.kv_cache().dtype()) {
    case v1::KvCacheConfig::DTYPE_BF16:
      options.kv_dtype = KvDtype::kBF16;
      break;
    case v1::KvCacheConfig::DTYPE_INT8:
      options.kv_dtype = KvDtype::kInt8;
      break;
    default:
      options.kv_dtype = KvDtype::kF32;
  }
  switch (config.executor().cpu_weights()) {
    case v1::ExecutorConfig::WEIGHTS_F32:
      options.weight_format = CpuWeightFormat::kF32;
      break;
    case v1::ExecutorConfig::WEIGHTS_BF16:
      options.weight_format = CpuWeightFormat::kBF16;
      break;
    case v1::ExecutorConfig::WEIGHTS_NATIVE:
      options.weight_format = CpuWeightFormat::kNative;
      break;
    default:
      options.weight_format = CpuWeightFormat::kAuto;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> cpu, CpuExecutor::Create(weights, options));
  const bool bf16_wanted = options.weight_format == CpuWeightFormat::kBF16 ||
                           (options.weight_format == CpuWeightFormat::kAuto &&
                            weights.config().torch_dtype == DType::kBF16);
  if (bf16_wanted && cpu->weight_format() != CpuWeightFormat::kBF16 &&
      cpu->weight_format() != CpuWeightFormat::kNative) {
    std::string reason = "a layer's shape has no bf16 product";
    if (!Bf16MatmulAvailable(&reason)) {
      reason = "no bf16 matrix product on this CPU: " + reason;
    } else if (options.batch_invariant && !Bf16GemvAvailable()) {
      reason =
          "batch-invariant bf16 products need AVX-512 BF16, which this CPU lacks "
          "(executor.batch_invariant: false keeps oneDNN's bf16 products)";
    }
    spdlog::warn(
        "executor.cpu_weights: bf16 weights were asked for, but {}; the linear layers run on "
        "fp32 weights (twice the memory and bytes per step)",
        reason);
  }
  const char* format = "fp32";
  switch (cpu->weight_format()) {
    case CpuWeightFormat::kNative:
      format = "native (GGUF blocks; unquantized tensors fp32)";
      break;
    case CpuWeightFormat::kBF16:
      format = "bf16";
      break;
    default:
      break;
  }
  built.weights =
      absl::StrFormat("%s, %.1f MiB", format, static_cast<double>(cpu->weight_bytes()) / (1 << 20));
  built.executor = std::move(cpu);
  built.name = "cpu";
  return built;
}

}  // namespace convoy
