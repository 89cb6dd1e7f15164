// Memory-mapped safetensors files: a JSON header of tensor descriptions, then the raw bytes.
#ifndef CONVOY_MODEL_SAFETENSORS_H_
#define CONVOY_MODEL_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"

namespace convoy {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the mapping; valid while the file is open
  size_t num_bytes = 0;
  std::string file;  // the file that holds it, for error messages

  int64_t NumElements() const;
};

// One mapped file. Tensors point into the mapping, which lives as long as this object.
class SafetensorsFile {
 public:
  // Maps `path` and validates the header: known dtypes, offsets inside the file and consistent
  // with shapes. Errors name the file and the tensor.
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

// Writes tensors (already in their dtype's byte layout) to a safetensors file.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace convoy

#endif  // CONVOY_MODEL_SAFETENSORS_H_
