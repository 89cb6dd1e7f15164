// Memory-mapped safetensors files: a JSON header of tensor descriptions, then the raw bytes.
#ifndef CONVOY_MODEL_SAFETENSORS_H_
#define CONVOY_MODEL_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"

namespace convoy {

// ggml's tensor types (gguf_file.h).
enum class GgmlType : uint32_t;

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  // With dtype kQuantized: the GGUF blocks the rows are stored in (each row whole blocks, rows
  // back to back); unused otherwise.
  GgmlType quant_type{};
  std::vector<int64_t> shape;
  // Into the mapping; valid while the file is open. Aligned to 8 bytes when the file's header
  // length is a multiple of 8 and its offsets are (as WriteSafetensors writes them); other files
  // may give unaligned data.
  const std::byte* data = nullptr;
  size_t num_bytes = 0;
  std::string file;  // the file that holds it, for error messages

  int64_t NumElements() const;
};

// One mapped file. Tensors point into the mapping, which lives as long as this object.
class SafetensorsFile {
 public:
  // Maps `path` read-only and validates the header: known dtypes (F32, F16, BF16), offsets inside
  // the data section and consistent with shapes. "__metadata__" is skipped. Errors name the file
  // and the tensor and say what was expected and what was found: NOT_FOUND for a missing file,
  // INVALID_ARGUMENT for a malformed one, UNIMPLEMENTED for another dtype.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// Writes tensors (already in their dtype's byte layout, little-endian) to a safetensors file, in
// the given order, with "__metadata__" {"format": "pt"} (which transformers expects) and the header
// padded with spaces to a multiple of 8 bytes. Written to `path`.tmp, then renamed to `path`.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

// The same, for tensors too large to hold all at once: `fill(i, bytes)` is called once per tensor,
// in order, with `bytes` sized to tensor i's bytes, and must write all of them.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};
using TensorFiller = std::function<absl::Status(size_t index, std::vector<std::byte>& bytes)>;
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorSpec>& specs,
                              const TensorFiller& fill);

}  // namespace convoy

#endif  // CONVOY_MODEL_SAFETENSORS_H_
