#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "model/file_util.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

using Json = nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool ParseDType(const std::string& name, DType& dtype) {
  for (DType candidate : {DType::kF32, DType::kF16, DType::kBF16}) {
    if (name == DTypeName(candidate)) {
      dtype = candidate;
      return true;
    }
  }
  return false;
}

// The byte count of `shape` in `dtype`, or false when it does not fit in 64 bits.
bool TensorBytes(const std::vector<int64_t>& shape, DType dtype, uint64_t& bytes) {
  bytes = static_cast<uint64_t>(DTypeSize(dtype));
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) return false;
  }
  return true;
}

// A non-negative JSON integer.
bool GetUnsigned(const Json& value, uint64_t& out) {
  if (!value.is_number_unsigned()) return false;
  out = value.get<uint64_t>();
  return true;
}

// Checks one header entry and fills `view` (all but `data`); `data_size` is the byte count after
// the header. Sets `begin` to the tensor's offset in the data section.
absl::Status ParseTensorEntry(const std::string& path, const std::string& name, const Json& entry,
                              uint64_t data_size, TensorView& view, uint64_t& begin) {
  auto invalid = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "': ", message));
  };
  if (!entry.is_object()) {
    return invalid(absl::StrCat("expected an object with dtype, shape and data_offsets, found ",
                                entry.dump()));
  }
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return invalid(absl::StrCat("expected a string 'dtype', found ",
                                dtype_it == entry.end() ? "none" : dtype_it->dump()));
  }
  if (!ParseDType(dtype_it->get<std::string>(), view.dtype)) {
    return absl::UnimplementedError(absl::StrCat(path, ": tensor '", name, "': dtype ",
                                                 dtype_it->dump(),
                                                 " is not supported, expected F32, F16 or BF16"));
  }
  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return invalid(absl::StrCat("expected a list 'shape', found ",
                                shape_it == entry.end() ? "none" : shape_it->dump()));
  }
  for (const Json& dim : *shape_it) {
    uint64_t value;
    if (!GetUnsigned(dim, value) || value > static_cast<uint64_t>(INT64_MAX)) {
      return invalid(
          absl::StrCat("expected 'shape' of non-negative integers, found ", shape_it->dump()));
    }
    view.shape.push_back(static_cast<int64_t>(value));
  }
  auto offsets_it = entry.find("data_offsets");
  uint64_t end = 0;
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !GetUnsigned((*offsets_it)[0], begin) || !GetUnsigned((*offsets_it)[1], end)) {
    return invalid(
        absl::StrCat("expected 'data_offsets' [begin, end] of non-negative integers, "
                     "found ",
                     offsets_it == entry.end() ? "none" : offsets_it->dump()));
  }
  if (begin > end) {
    return invalid(
        absl::StrFormat("expected data_offsets begin <= end, found [%d, %d]", begin, end));
  }
  if (end > data_size) {
    return invalid(absl::StrFormat(
        "expected data_offsets within the %d-byte data section, found [%d, %d] (file truncated?)",
        data_size, begin, end));
  }
  uint64_t expected_bytes;
  if (!TensorBytes(view.shape, view.dtype, expected_bytes)) {
    return invalid(absl::StrCat("shape ", ShapeString(view.shape), " is too large"));
  }
  if (end - begin != expected_bytes) {
    return invalid(absl::StrFormat(
        "expected %d bytes for shape %s in %s, found data_offsets [%d, %d] (%d bytes)",
        expected_bytes, ShapeString(view.shape), DTypeName(view.dtype), begin, end, end - begin));
  }
  view.name = name;
  view.file = path;
  view.num_bytes = end - begin;
  return absl::OkStatus();
}

}  // namespace

int64_t TensorView::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_size_);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path, "open");
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int error_number = errno;
    close(fd);
    return ErrnoToStatus(error_number, path, "stat");
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a regular file"));
  }
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);
  if (file_size < 8) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: expected at least the 8-byte header length, found a %d-byte file", path, file_size));
  }
  void* mapping = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int error_number = errno;
  close(fd);
  if (mapping == MAP_FAILED) return ErrnoToStatus(error_number, path, "mmap");

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_ = mapping;
  file->mapping_size_ = file_size;
  const auto* bytes = static_cast<const unsigned char*>(mapping);

  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  if (header_size > file_size - 8) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: header length %d exceeds the %d bytes that follow the 8-byte length (file truncated "
        "or not safetensors?)",
        path, header_size, file_size - 8));
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  Json header;
  try {
    header = Json::parse(header_begin, header_begin + header_size);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header is not valid JSON: ", e.what()));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected the header to be a JSON object, found ", header.type_name()));
  }
  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = file_size - data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) continue;
    TensorView view;
    uint64_t begin = 0;
    RETURN_IF_ERROR(ParseTensorEntry(path, name, entry, data_size, view, begin));
    view.data = reinterpret_cast<const std::byte*>(bytes + data_start + begin);
    file->tensors_.emplace(name, std::move(view));
  }
  return file;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorSpec>& specs,
                              const TensorFiller& fill) {
  nlohmann::ordered_json header;
  header[kMetadataKey] = {{"format", "pt"}};
  std::set<std::string> names;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorSpec& spec : specs) {
    if (spec.name == kMetadataKey || !names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name '", spec.name, "' is reserved or repeated"));
    }
    uint64_t bytes;
    if (!TensorBytes(spec.shape, spec.dtype, bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", spec.name,
                                                     "': invalid shape ", ShapeString(spec.shape)));
    }
    header[spec.name] = {{"dtype", DTypeName(spec.dtype)},
                         {"shape", spec.shape},
                         {"data_offsets", {offset, offset + bytes}}};
    sizes.push_back(bytes);
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  const std::string temp_path = absl::StrCat(path, ".tmp");
  std::FILE* out = std::fopen(temp_path.c_str(), "wb");
  if (out == nullptr) return ErrnoToStatus(errno, temp_path, "create");
  auto fail = [&](absl::Status status) {
    std::fclose(out);
    std::remove(temp_path.c_str());
    return status;
  };
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header_text.size() >> (8 * i));
  if (std::fwrite(length, 1, 8, out) != 8 ||
      std::fwrite(header_text.data(), 1, header_text.size(), out) != header_text.size()) {
    return fail(ErrnoToStatus(errno, temp_path, "write"));
  }
  std::vector<std::byte> buffer;
  for (size_t i = 0; i < specs.size(); ++i) {
    buffer.assign(sizes[i], std::byte{0});
    absl::Status status = fill(i, buffer);
    if (!status.ok()) return fail(status);
    if (buffer.size() != sizes[i]) {
      return fail(absl::InternalError(
          absl::StrFormat("%s: tensor '%s': expected %d bytes from the filler, found %d", path,
                          specs[i].name, sizes[i], buffer.size())));
    }
    if (std::fwrite(buffer.data(), 1, buffer.size(), out) != buffer.size()) {
      return fail(ErrnoToStatus(errno, temp_path, "write"));
    }
  }
  if (std::fclose(out) != 0) {
    int error_number = errno;
    std::remove(temp_path.c_str());
    return ErrnoToStatus(error_number, temp_path, "write");
  }
  if (std::rename(temp_path.c_str(), path.c_str()) != 0) {
    int error_number = errno;
    std::remove(temp_path.c_str());
    return ErrnoToStatus(error_number, path, "replace");
  }
  return absl::OkStatus();
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorToWrite& tensor : tensors) {
    uint64_t expected_bytes;
    if (TensorBytes(tensor.shape, tensor.dtype, expected_bytes) &&
        tensor.bytes.size() != expected_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s': expected %d bytes for shape %s in %s, found %d", path, tensor.name,
          expected_bytes, ShapeString(tensor.shape), DTypeName(tensor.dtype), tensor.bytes.size()));
    }
    specs.push_back({tensor.name, tensor.dtype, tensor.shape});
  }
  return WriteSafetensors(path, specs, [&](size_t index, std::vector<std::byte>& bytes) {
    bytes = tensors[index].bytes;
    return absl::OkStatus();
  });
}

}  // namespace convoy
