// Writes GGUF bytes for tests, including malformed ones: any value type number, tensor type
// number, offset or version can be set. A test fixture format, not a general writer: the
// reference files come from llama.cpp's own Python writer (scripts/fixtures/gguf_fixtures.py).
#ifndef CONVOY_TESTS_MODEL_GGUF_TEST_BUILDER_H_
#define CONVOY_TESTS_MODEL_GGUF_TEST_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace convoy::testing {

class GgufBuilder {
 public:
  // Little-endian bytes of an integer of `size` bytes.
  static std::string Le(uint64_t value, int size) {
    std::string bytes;
    for (int i = 0; i < size; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return bytes;
  }
  static std::string Str(const std::string& s) { return Le(s.size(), 8) + s; }
  static std::string F32(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return Le(bits, 4);
  }

  // A metadata entry with its value type number and value bytes as given.
  GgufBuilder& Raw(const std::string& key, uint32_t type, const std::string& value_bytes) {
    Remove(key);
    entries_.push_back({key, Le(type, 4) + value_bytes});
    return *this;
  }
  GgufBuilder& U32(const std::string& key, uint32_t v) { return Raw(key, 4, Le(v, 4)); }
  GgufBuilder& I32(const std::string& key, int32_t v) {
    return Raw(key, 5, Le(static_cast<uint32_t>(v), 4));
  }
  GgufBuilder& U64(const std::string& key, uint64_t v) { return Raw(key, 10, Le(v, 8)); }
  GgufBuilder& F32(const std::string& key, float v) { return Raw(key, 6, F32(v)); }
  GgufBuilder& String(const std::string& key, const std::string& v) { return Raw(key, 8, Str(v)); }
  // Arrays (value type 9): element type number, count, then the elements.
  GgufBuilder& StringArray(const std::string& key, const std::vector<std::string>& values) {
    std::string bytes = Le(8, 4) + Le(values.size(), 8);
    for (const std::string& v : values) bytes += Str(v);
    return Raw(key, 9, bytes);
  }
  GgufBuilder& I32Array(const std::string& key, const std::vector<int32_t>& values) {
    std::string bytes = Le(5, 4) + Le(values.size(), 8);
    for (int32_t v : values) bytes += Le(static_cast<uint32_t>(v), 4);
    return Raw(key, 9, bytes);
  }
  GgufBuilder& Bool(const std::string& key, bool v) { return Raw(key, 7, Le(v ? 1 : 0, 1)); }
  GgufBuilder& Remove(const std::string& key) {
    std::erase_if(entries_, [&](const auto& e) { return e.first == key; });
    return *this;
  }

  // `shape` outermost first; `type` a ggml type number; `data` its bytes. `offset` overrides the
  // offset written (otherwise each tensor follows the previous one, aligned).
  GgufBuilder& Tensor(const std::string& name, uint32_t type, std::vector<uint64_t> shape,
                      std::string data, std::optional<uint64_t> offset = std::nullopt) {
    tensors_.push_back({name, type, std::move(shape), std::move(data), offset});
    return *this;
  }
  GgufBuilder& F32Tensor(const std::string& name, std::vector<uint64_t> shape,
                         const std::vector<float>& values) {
    std::string data(values.size() * 4, '\0');
    std::memcpy(data.data(), values.data(), data.size());
    return Tensor(name, 0, std::move(shape), std::move(data));
  }
  GgufBuilder& RemoveTensor(const std::string& name) {
    std::erase_if(tensors_, [&](const TensorEntry& t) { return t.name == name; });
    return *this;
  }

  GgufBuilder& Magic(std::string magic) {
    magic_ = std::move(magic);
    return *this;
  }
  GgufBuilder& Version(uint32_t version) {
    version_ = version;
    return *this;
  }
  // Written as general.alignment (uint32) and used to lay out the data.
  GgufBuilder& Alignment(uint32_t alignment) {
    alignment_ = alignment;
    return U32("general.alignment", alignment);
  }

  std::string Build() const {
    std::string out = magic_ + Le(version_, 4) + Le(tensors_.size(), 8) + Le(entries_.size(), 8);
    for (const auto& [key, value] : entries_) out += Str(key) + value;
    uint64_t offset = 0;
    std::string data;
    for (const TensorEntry& t : tensors_) {
      out += Str(t.name) + Le(t.shape.size(), 4);
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) out += Le(*it, 8);
      out += Le(t.type, 4) + Le(t.offset.value_or(offset), 8);
      data += t.data;
      data.append(Pad(data.size()), '\0');
      offset = data.size();
    }
    out.append(Pad(out.size()), '\0');
    // The last tensor's padding is left off: the file ends where its data ends.
    return out + Trimmed(data);
  }

 private:
  struct TensorEntry {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> shape;
    std::string data;
    std::optional<uint64_t> offset;
  };

  size_t Pad(size_t n) const { return (alignment_ - n % alignment_) % alignment_; }

  // The data without the padding after the last tensor.
  std::string Trimmed(std::string data) const {
    if (tensors_.empty()) return data;
    size_t end = 0, at = 0;
    for (const TensorEntry& t : tensors_) {
      end = at + t.data.size();
      at = end + Pad(end);
    }
    data.resize(end);
    return data;
  }

  std::string magic_ = "GGUF";
  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, std::string>> entries_;
  std::vector<TensorEntry> tensors_;
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_MODEL_GGUF_TEST_BUILDER_H_
