// GGUF files (llama.cpp's single-file model format, versions 2 and 3, little-endian),
// memory-mapped: a header, typed metadata, tensor descriptions, then the tensor data at an aligned
// offset.
//
// Every count, length and offset in the file is checked against the file's size before it is
// used, so a truncated or corrupted file gives an error, never a read out of bounds or an
// allocation larger than the file.
#ifndef CONVOY_MODEL_GGUF_FILE_H_
#define CONVOY_MODEL_GGUF_FILE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy {

// Metadata value types, numbered as in the file.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", ..., "float64"; "type N" for a number outside the enum.
std::string GgufValueTypeName(GgufValueType type);

// ggml's tensor types, numbered as in the file. Only the ones this code names; FindGgmlType knows
// the sizes of the others.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// A tensor type's name as ggml spells it ("Q4_K") and its block: `block_elements` consecutive
// values of a row are stored in `block_bytes` bytes.
struct GgmlTypeInfo {
  const char* name;
  int64_t block_elements;
  int64_t block_bytes;
};

// nullptr for a number that ggml does not define (or no longer does).
const GgmlTypeInfo* FindGgmlType(uint32_t type);
std::string GgmlTypeName(GgmlType type);

// One metadata value. Strings and arrays point into the mapping: valid while the file is open.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  // The scalar types (integers, bool, floats), as their bytes read little-endian and widened to
  // 64 bits; read them with AsInt / AsDouble / AsBool.
  uint64_t scalar_bits = 0;
  std::string_view string;  // kString

  // kArray. Arrays of arrays are refused at load (no model uses them).
  GgufValueType element_type = GgufValueType::kUint8;
  uint64_t count = 0;
  const std::byte* elements = nullptr;    // the packed elements, for fixed-size element types
  std::vector<std::string_view> strings;  // the elements, for arrays of strings

  // The value of an integer type (any width or signedness) that fits in int64; nullopt for
  // other types and for a uint64 above INT64_MAX.
  std::optional<int64_t> AsInt() const;
  // The value of a float type, or of an integer type converted; nullopt otherwise.
  std::optional<double> AsDouble() const;
  std::optional<bool> AsBool() const;
  // Element `i` of an array of integers; nullopt for other arrays or i out of range.
  std::optional<int64_t> ArrayInt(uint64_t i) const;

  // For error messages: the type and a short rendering of the value ("uint32 7",
  // "string \"llama\"", "array of 3 string").
  std::string Describe() const;
};

// One tensor. `shape` lists the dimensions outermost first, as numpy and PyTorch do: the file's
// dimensions (innermost first) reversed, so a matrix of `n` rows of `k` values is [n, k].
struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;  // may hold a number outside the enum: see FindGgmlType
  std::vector<int64_t> shape;
  uint64_t offset = 0;              // from the start of the data section
  const std::byte* data = nullptr;  // into the mapping
  uint64_t num_bytes = 0;

  int64_t NumElements() const;
  // Values per row: the innermost dimension (1 for a scalar).
  int64_t RowLength() const { return shape.empty() ? 1 : shape.back(); }
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it. Errors name the file, then the key or tensor, and say
  // what was expected and what was found: NOT_FOUND for a missing file; INVALID_ARGUMENT for a
  // malformed one (truncated, bad magic, unknown value or tensor type, duplicate names, data out
  // of range or misaligned, a row that is not whole blocks); UNIMPLEMENTED for an unsupported
  // version or big-endian file, or an array of arrays.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  // general.alignment, or 32 when absent.
  uint64_t alignment() const { return alignment_; }
  // The byte offset of the data section in the file.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  // nullptr when absent.
  const GgufValue* FindValue(std::string_view key) const;

  // In file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const GgufTensor* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  absl::Status Parse();

  std::string path_;
  void* mapping_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace convoy

#endif  // CONVOY_MODEL_GGUF_FILE_H_
