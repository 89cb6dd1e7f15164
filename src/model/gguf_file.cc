#include "model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "model/file_util.h"

namespace convoy {
namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;
constexpr char kAlignmentKey[] = "general.alignment";
// ggml's limit on a tensor's rank.
constexpr uint32_t kMaxDims = 4;
// The fewest bytes a metadata entry (key length, empty key, type, one-byte value) and a tensor
// description (name length, empty name, rank, type, offset) take: bounds the counts in the
// header before anything is reserved for them.
constexpr uint64_t kMinEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

// Indexed by ggml type number; block_elements 0 marks a number ggml no longer uses.
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {"F32", 1, 4},        {"F16", 1, 2},        {"Q4_0", 32, 18},     {"Q4_1", 32, 20},
    {"Q4_2", 0, 0},       {"Q4_3", 0, 0},       {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 40},     {"Q2_K", 256, 84},    {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},   {"Q6_K", 256, 210},   {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},  {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110},  {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},        {"I32", 1, 4},        {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},   {"BF16", 1, 2},       {"Q4_0_4_4", 0, 0},
    {"Q4_0_4_8", 0, 0},   {"Q4_0_8_8", 0, 0},   {"TQ1_0", 256, 54},   {"TQ2_0", 256, 66},
    {"IQ4_NL_4_4", 0, 0}, {"IQ4_NL_4_8", 0, 0}, {"IQ4_NL_8_8", 0, 0}, {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},    {"Q1_0", 128, 18},
};

// Bytes of one element of a fixed-size metadata type; 0 for string, array and unknown types.
uint64_t ScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsKnownValueType(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

// Little-endian, from any alignment.
uint64_t LoadLittleEndian(const std::byte* p, uint64_t size) {
  uint64_t value = 0;
  for (uint64_t i = 0; i < size; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

int64_t SignExtend(uint64_t bits, uint64_t size) {
  const int shift = static_cast<int>(64 - 8 * size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

// Reads the file front to back; every read is checked against the end and names what it read.
class Cursor {
 public:
  Cursor(const std::string& path, const std::byte* data, uint64_t size)
      : path_(path), data_(data), size_(size) {}

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return size_ - position_; }

  absl::Status Invalid(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", message));
  }

  absl::Status Unsupported(const std::string& message) const {
    return absl::UnimplementedError(absl::StrCat(path_, ": ", message));
  }

  absl::StatusOr<const std::byte*> Take(uint64_t bytes, const std::string& what) {
    if (bytes > remaining()) {
      return Invalid(absl::StrFormat(
          "truncated: %s needs %d bytes at offset %d, found %d (the file has %d bytes)", what,
          bytes, position_, remaining(), size_));
    }
    const std::byte* at = data_ + position_;
    position_ += bytes;
    return at;
  }

  absl::StatusOr<uint64_t> Unsigned(uint64_t bytes, const std::string& what) {
    ASSIGN_OR_RETURN(const std::byte* at, Take(bytes, what));
    return LoadLittleEndian(at, bytes);
  }

  absl::StatusOr<std::string_view> String(const std::string& what) {
    ASSIGN_OR_RETURN(uint64_t length, Unsigned(8, absl::StrCat("the length of ", what)));
    ASSIGN_OR_RETURN(const std::byte* at, Take(length, what));
    return std::string_view(reinterpret_cast<const char*>(at), length);
  }

 private:
  const std::string& path_;
  const std::byte* data_;
  uint64_t size_;
  uint64_t position_ = 0;
};

std::string Quoted(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string shown(text.substr(0, kMaxShown));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return absl::StrCat("\"", shown, text.size() > kMaxShown ? "...\"" : "\"");
}

absl::Status ReadValue(Cursor& cursor, const std::string& key, GgufValue& value) {
  const std::string what = absl::StrCat("the value of key '", key, "'");
  if (value.type == GgufValueType::kString) {
    ASSIGN_OR_RETURN(value.string, cursor.String(what));
    return absl::OkStatus();
  }
  if (value.type != GgufValueType::kArray) {
    const uint64_t size = ScalarSize(value.type);
    ASSIGN_OR_RETURN(value.scalar_bits, cursor.Unsigned(size, what));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(uint64_t element_type,
                   cursor.Unsigned(4, absl::StrCat("the element type of key '", key, "'")));
  if (!IsKnownValueType(static_cast<uint32_t>(element_type))) {
    return cursor.Invalid(absl::StrFormat(
        "key '%s': unknown array element type %d, expected 0 to 12", key, element_type));
  }
  value.element_type = static_cast<GgufValueType>(element_type);
  if (value.element_type == GgufValueType::kArray) {
    return cursor.Unsupported(absl::StrCat("key '", key, "': arrays of arrays are not supported"));
  }
  ASSIGN_OR_RETURN(value.count,
                   cursor.Unsigned(8, absl::StrCat("the element count of key '", key, "'")));
  if (value.element_type == GgufValueType::kString) {
    // Each string takes at least its 8-byte length: refuse a count the file cannot hold before
    // reserving room for it.
    if (value.count > cursor.remaining() / 8) {
      return cursor.Invalid(
          absl::StrFormat("truncated: key '%s' declares %d strings, but only %d bytes follow", key,
                          value.count, cursor.remaining()));
    }
    value.strings.reserve(value.count);
    for (uint64_t i = 0; i < value.count; ++i) {
      ASSIGN_OR_RETURN(std::string_view s,
                       cursor.String(absl::StrCat("element ", i, " of key '", key, "'")));
      value.strings.push_back(s);
    }
    return absl::OkStatus();
  }
  const uint64_t size = ScalarSize(value.element_type);
  if (value.count > cursor.remaining() / size) {
    return cursor.Invalid(absl::StrFormat(
        "truncated: key '%s' declares %d elements of %s (%d bytes each), but only %d bytes follow",
        key, value.count, GgufValueTypeName(value.element_type), size, cursor.remaining()));
  }
  ASSIGN_OR_RETURN(value.elements, cursor.Take(value.count * size, what));
  return absl::OkStatus();
}

}  // namespace

std::string GgufValueTypeName(GgufValueType type) {
  static constexpr const char* kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                           "int32",  "float32", "bool",   "string", "array",
                                           "uint64", "int64",   "float64"};
  const uint32_t index = static_cast<uint32_t>(type);
  if (index < std::size(kNames)) return kNames[index];
  return absl::StrCat("type ", index);
}

const GgmlTypeInfo* FindGgmlType(uint32_t type) {
  if (type >= std::size(kGgmlTypes) || kGgmlTypes[type].block_elements == 0) return nullptr;
  return &kGgmlTypes[type];
}

std::string GgmlTypeName(GgmlType type) {
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
  return info != nullptr ? info->name : absl::StrCat("type ", static_cast<uint32_t>(type));
}

std::optional<int64_t> GgufValue::AsInt() const {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
      return static_cast<int64_t>(scalar_bits);
    case GgufValueType::kUint64:
      if (scalar_bits > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(scalar_bits);
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return SignExtend(scalar_bits, ScalarSize(type));
    default:
      return std::nullopt;
  }
}

std::optional<double> GgufValue::AsDouble() const {
  if (type == GgufValueType::kFloat32) {
    const uint32_t bits = static_cast<uint32_t>(scalar_bits);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  if (type == GgufValueType::kFloat64) {
    double d;
    std::memcpy(&d, &scalar_bits, sizeof(d));
    return d;
  }
  if (type == GgufValueType::kUint64) return static_cast<double>(scalar_bits);
  std::optional<int64_t> integer = AsInt();
  if (integer.has_value()) return static_cast<double>(*integer);
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type != GgufValueType::kBool) return std::nullopt;
  return scalar_bits != 0;
}

std::optional<int64_t> GgufValue::ArrayInt(uint64_t i) const {
  if (type != GgufValueType::kArray || elements == nullptr || i >= count) return std::nullopt;
  GgufValue element;
  element.type = element_type;
  const uint64_t size = ScalarSize(element_type);
  element.scalar_bits = LoadLittleEndian(elements + i * size, size);
  return element.AsInt();
}

std::string GgufValue::Describe() const {
  const std::string name = GgufValueTypeName(type);
  switch (type) {
    case GgufValueType::kString:
      return absl::StrCat(name, " ", Quoted(string));
    case GgufValueType::kArray:
      return absl::StrCat("array of ", count, " ", GgufValueTypeName(element_type));
    case GgufValueType::kBool:
      return absl::StrCat(name, " ", scalar_bits != 0 ? "true" : "false");
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return absl::StrCat(name, " ", *AsDouble());
    case GgufValueType::kUint64:
      return absl::StrCat(name, " ", scalar_bits);
    default:
      return absl::StrCat(name, " ", AsInt().value_or(0));
  }
}

int64_t GgufTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path, "open");
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int error_number = errno;
    close(fd);
    return ErrnoToStatus(error_number, path, "stat");
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a GGUF file, found ",
                     S_ISDIR(info.st_mode) ? "a directory" : "a special file"));
  }
  file->size_ = static_cast<size_t>(info.st_size);
  if (file->size_ > 0) {
    void* mapping = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int error_number = errno;
      close(fd);
      return ErrnoToStatus(error_number, path, "map");
    }
    file->mapping_ = mapping;
  }
  close(fd);
  RETURN_IF_ERROR(file->Parse());
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
}

const GgufValue* GgufFile::FindValue(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status GgufFile::Parse() {
  const auto* base = static_cast<const std::byte*>(mapping_);
  Cursor cursor(path_, base, size_);
  // A short file that is not the start of "GGUF" is not GGUF rather than truncated.
  const size_t head = std::min<size_t>(size_, 4);
  if (head > 0 && head < 4 && std::memcmp(base, kMagic, head) != 0) {
    return cursor.Invalid(absl::StrFormat(
        "not a GGUF file: expected the magic \"GGUF\", found %s (the file has %d bytes)",
        Quoted(std::string_view(reinterpret_cast<const char*>(base), head)), size_));
  }
  ASSIGN_OR_RETURN(const std::byte* magic, cursor.Take(4, "the magic \"GGUF\""));
  if (std::memcmp(magic, kMagic, 4) != 0) {
    return cursor.Invalid(
        absl::StrFormat("not a GGUF file: expected the magic \"GGUF\", found %s",
                        Quoted(std::string_view(reinterpret_cast<const char*>(magic), 4))));
  }
  ASSIGN_OR_RETURN(uint64_t version, cursor.Unsigned(4, "the version"));
  version_ = static_cast<uint32_t>(version);
  if (version_ != 2 && version_ != 3) {
    // A big-endian file has the same magic and a byte-swapped version.
    const bool big_endian = version_ == 0x02000000u || version_ == 0x03000000u;
    return absl::UnimplementedError(
        absl::StrFormat("%s: unsupported GGUF version %d%s, expected 3 (or 2)", path_, version_,
                        big_endian ? " (a big-endian file, which is not supported)" : ""));
  }
  ASSIGN_OR_RETURN(uint64_t tensor_count, cursor.Unsigned(8, "the tensor count"));
  ASSIGN_OR_RETURN(uint64_t entry_count, cursor.Unsigned(8, "the metadata entry count"));
  if (entry_count > cursor.remaining() / kMinEntryBytes ||
      tensor_count > cursor.remaining() / kMinTensorInfoBytes) {
    return cursor.Invalid(absl::StrFormat(
        "truncated: the header declares %d metadata entries and %d tensors, but only %d bytes "
        "follow",
        entry_count, tensor_count, cursor.remaining()));
  }

  for (uint64_t i = 0; i < entry_count; ++i) {
    ASSIGN_OR_RETURN(std::string_view key_view,
                     cursor.String(absl::StrCat("the key of metadata entry ", i)));
    std::string key(key_view);
    ASSIGN_OR_RETURN(uint64_t type,
                     cursor.Unsigned(4, absl::StrCat("the type of key '", key, "'")));
    if (!IsKnownValueType(static_cast<uint32_t>(type))) {
      return cursor.Invalid(
          absl::StrFormat("key '%s': unknown value type %d, expected 0 to 12", key, type));
    }
    GgufValue value;
    value.type = static_cast<GgufValueType>(type);
    RETURN_IF_ERROR(ReadValue(cursor, key, value));
    if (!metadata_.emplace(key, std::move(value)).second) {
      return cursor.Invalid(absl::StrCat("key '", key, "' appears twice"));
    }
  }

  if (const GgufValue* alignment = FindValue(kAlignmentKey); alignment != nullptr) {
    const uint64_t a = alignment->scalar_bits;
    if (alignment->type != GgufValueType::kUint32 || a == 0 || (a & (a - 1)) != 0) {
      return cursor.Invalid(absl::StrCat("key '", kAlignmentKey,
                                         "': expected a uint32 power of two, found ",
                                         alignment->Describe()));
    }
    alignment_ = a;
  } else {
    alignment_ = kDefaultAlignment;
  }

  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor tensor;
    ASSIGN_OR_RETURN(std::string_view name, cursor.String(absl::StrCat("the name of tensor ", i)));
    tensor.name = std::string(name);
    const std::string what = absl::StrCat("tensor '", tensor.name, "'");
    ASSIGN_OR_RETURN(uint64_t rank, cursor.Unsigned(4, absl::StrCat("the rank of ", what)));
    if (rank > kMaxDims) {
      return cursor.Invalid(
          absl::StrFormat("%s: expected at most %d dimensions, found %d", what, kMaxDims, rank));
    }
    std::vector<int64_t> dims;  // innermost first, as in the file
    for (uint64_t d = 0; d < rank; ++d) {
      ASSIGN_OR_RETURN(uint64_t dim,
                       cursor.Unsigned(8, absl::StrCat("dimension ", d, " of ", what)));
      if (dim > static_cast<uint64_t>(INT64_MAX)) {
        return cursor.Invalid(absl::StrFormat("%s: dimension %d is %d, expected at most %d", what,
                                              d, dim, INT64_MAX));
      }
      dims.push_back(static_cast<int64_t>(dim));
    }
    tensor.shape.assign(dims.rbegin(), dims.rend());
    ASSIGN_OR_RETURN(uint64_t type, cursor.Unsigned(4, absl::StrCat("the type of ", what)));
    const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
    if (info == nullptr) {
      return cursor.Invalid(absl::StrFormat("%s: unknown tensor type %d", what, type));
    }
    tensor.type = static_cast<GgmlType>(type);
    ASSIGN_OR_RETURN(tensor.offset, cursor.Unsigned(8, absl::StrCat("the data offset of ", what)));

    // Element count, whole blocks per row, and the byte count, without overflow.
    uint64_t elements = 1;
    for (int64_t dim : dims) {
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dim), &elements) ||
          elements > static_cast<uint64_t>(INT64_MAX)) {
        return cursor.Invalid(absl::StrFormat("%s: shape [%s] has more than 2^63 elements", what,
                                              absl::StrJoin(tensor.shape, ", ")));
      }
    }
    const uint64_t block = static_cast<uint64_t>(info->block_elements);
    if (static_cast<uint64_t>(tensor.RowLength()) % block != 0) {
      return cursor.Invalid(absl::StrFormat("%s: rows of %d values are not whole %s blocks of %d",
                                            what, tensor.RowLength(), info->name, block));
    }
    if (__builtin_mul_overflow(elements / block, static_cast<uint64_t>(info->block_bytes),
                               &tensor.num_bytes)) {
      return cursor.Invalid(absl::StrFormat("%s: data size overflows 64 bits", what));
    }
    if (tensor.offset % alignment_ != 0) {
      return cursor.Invalid(
          absl::StrFormat("%s: data offset %d is not a multiple of the alignment %d", what,
                          tensor.offset, alignment_));
    }
    if (!tensor_index_.emplace(tensor.name, tensors_.size()).second) {
      return cursor.Invalid(absl::StrCat(what, " appears twice"));
    }
    tensors_.push_back(std::move(tensor));
  }

  // The data section starts at the next multiple of the alignment; a file without tensor data
  // may end before it.
  const uint64_t end_of_infos = cursor.position();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = data_offset_ <= size_ ? size_ - data_offset_ : 0;
  for (GgufTensor& tensor : tensors_) {
    if (tensor.num_bytes == 0) {
      tensor.data = base;
      continue;
    }
    if (tensor.offset > data_size || tensor.num_bytes > data_size - tensor.offset) {
      return cursor.Invalid(absl::StrFormat(
          "tensor '%s': data [%d, %d) of the data section (%s %s, %d bytes) ends beyond the "
          "file: the data section starts at byte %d and holds %d bytes (truncated?)",
          tensor.name, tensor.offset, tensor.offset + tensor.num_bytes, GgmlTypeName(tensor.type),
          absl::StrCat("[", absl::StrJoin(tensor.shape, ", "), "]"), tensor.num_bytes, data_offset_,
          data_size));
    }
    tensor.data = base + data_offset_ + tensor.offset;
  }
  return absl::OkStatus();
}

}  // namespace convoy
