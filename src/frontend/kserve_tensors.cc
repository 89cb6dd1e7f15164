#include "frontend/kserve_tensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"

namespace convoy {
namespace {

static_assert(std::endian::native == std::endian::little,
              "raw tensor contents are little-endian; this code copies them as they are");

absl::Status Invalid(absl::string_view name, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", reason));
}

// Bytes per element; 0 for BYTES (variable); nullopt for a datatype the protocol does not have.
std::optional<size_t> ElementSize(absl::string_view datatype) {
  static const std::map<absl::string_view, size_t> kSizes = {
      {"BOOL", 1},  {"INT8", 1},   {"UINT8", 1}, {"INT16", 2},  {"UINT16", 2},
      {"FP16", 2},  {"BF16", 2},   {"INT32", 4}, {"UINT32", 4}, {"FP32", 4},
      {"INT64", 8}, {"UINT64", 8}, {"FP64", 8},  {"BYTES", 0}};
  auto it = kSizes.find(datatype);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::string KServeIntegerText(KServeInteger value) {
  if (value < 0) return absl::StrCat(static_cast<int64_t>(value));
  return absl::StrCat(static_cast<uint64_t>(value));
}

absl::StatusOr<KServeInput> KServeInput::Make(const Tensor& tensor, const std::string* raw) {
  KServeInput input(tensor, raw);
  const std::string& name = tensor.name();
  const std::optional<size_t> size = ElementSize(tensor.datatype());
  if (!size) {
    return Invalid(name, absl::StrCat("unknown datatype '", tensor.datatype().substr(0, 16), "'"));
  }
  constexpr int64_t kMaxElements = int64_t{1} << 32;
  for (int64_t dim : tensor.shape()) {
    if (dim < 0) {
      return Invalid(name, absl::StrCat("shape ", input.ShapeText(), " has a negative dimension"));
    }
    // Capped: no request holds that many elements, and the size checks then fail.
    input.count_ = dim > 0 && input.count_ > kMaxElements / dim ? kMaxElements : input.count_ * dim;
  }
  if (tensor.parameters().contains("shared_memory_region")) {
    return Invalid(name, "shared-memory inputs are not supported; send the data in the request");
  }
  if (raw == nullptr) return input;
  if (*size > 0) {
    const int64_t bytes = input.count_ * static_cast<int64_t>(*size);
    if (static_cast<int64_t>(raw->size()) != bytes) {
      return Invalid(name,
                     absl::StrCat("shape ", input.ShapeText(), " of ", tensor.datatype(), " needs ",
                                  bytes, " bytes of raw contents, got ", raw->size()));
    }
    return input;
  }
  // BYTES: each element is a 4-byte little-endian length and that many bytes.
  size_t at = 0;
  while (at < raw->size()) {
    uint32_t length = 0;
    if (raw->size() - at < sizeof(length)) break;
    std::memcpy(&length, raw->data() + at, sizeof(length));
    at += sizeof(length);
    if (raw->size() - at < length) break;
    input.strings_.push_back(absl::string_view(*raw).substr(at, length));
    at += length;
  }
  if (at != raw->size()) {
    return Invalid(name,
                   "raw BYTES contents are cut short: each element is a 4-byte little-endian "
                   "length followed by that many bytes");
  }
  if (static_cast<int64_t>(input.strings_.size()) != input.count_) {
    return Invalid(name, absl::StrCat("shape ", input.ShapeText(), " has ", input.count_,
                                      " elements, the raw contents ", input.strings_.size()));
  }
  return input;
}

std::string KServeInput::ShapeText() const {
  return absl::StrCat("[", absl::StrJoin(tensor_->shape(), ", "), "]");
}

absl::Status KServeInput::CheckType(std::initializer_list<absl::string_view> allowed) const {
  if (std::find(allowed.begin(), allowed.end(), tensor_->datatype()) != allowed.end()) {
    return absl::OkStatus();
  }
  return Invalid(name(), absl::StrCat("datatype ", tensor_->datatype().substr(0, 16), "; expected ",
                                      absl::StrJoin(allowed, " or ")));
}

absl::Status KServeInput::CheckOneElement() const {
  if (count_ == 1) return absl::OkStatus();
  return Invalid(name(), absl::StrCat("expected one element, got shape ", ShapeText()));
}

absl::StatusOr<std::vector<KServeInteger>> KServeInput::Integers() const {
  RETURN_IF_ERROR(CheckType({"INT32", "INT64", "UINT32", "UINT64"}));
  const std::string& type = tensor_->datatype();
  const inference::InferTensorContents& c = tensor_->contents();
  std::vector<KServeInteger> out;
  if (raw_ != nullptr) {
    for (int64_t i = 0; i < count_; ++i) out.push_back(RawInteger(i));
  } else if (type == "INT32") {
    out.assign(c.int_contents().begin(), c.int_contents().end());
  } else if (type == "INT64") {
    out.assign(c.int64_contents().begin(), c.int64_contents().end());
  } else if (type == "UINT32") {
    out.assign(c.uint_contents().begin(), c.uint_contents().end());
  } else {
    out.assign(c.uint64_contents().begin(), c.uint64_contents().end());
  }
  RETURN_IF_ERROR(CheckTypedCount(out.size()));
  return out;
}

absl::StatusOr<double> KServeInput::Number() const {
  RETURN_IF_ERROR(CheckType({"FP32", "FP64"}));
  RETURN_IF_ERROR(CheckOneElement());
  const bool fp32 = tensor_->datatype() == "FP32";
  if (raw_ != nullptr) {
    if (fp32) return Load<float>(0);
    return Load<double>(0);
  }
  const inference::InferTensorContents& c = tensor_->contents();
  RETURN_IF_ERROR(CheckTypedCount(fp32 ? c.fp32_contents_size() : c.fp64_contents_size()));
  return fp32 ? c.fp32_contents(0) : c.fp64_contents(0);
}

absl::StatusOr<bool> KServeInput::Bool() const {
  RETURN_IF_ERROR(CheckType({"BOOL"}));
  RETURN_IF_ERROR(CheckOneElement());
  if (raw_ != nullptr) return (*raw_)[0] != 0;
  RETURN_IF_ERROR(CheckTypedCount(tensor_->contents().bool_contents_size()));
  return tensor_->contents().bool_contents(0);
}

absl::StatusOr<std::vector<std::string>> KServeInput::Strings() const {
  RETURN_IF_ERROR(CheckType({"BYTES"}));
  if (raw_ != nullptr) return std::vector<std::string>(strings_.begin(), strings_.end());
  const auto& bytes = tensor_->contents().bytes_contents();
  RETURN_IF_ERROR(CheckTypedCount(bytes.size()));
  return std::vector<std::string>(bytes.begin(), bytes.end());
}

template <typename T>
T KServeInput::Load(int64_t i) const {
  T value;
  std::memcpy(&value, raw_->data() + i * sizeof(T), sizeof(T));
  return value;
}

KServeInteger KServeInput::RawInteger(int64_t i) const {
  const std::string& type = tensor_->datatype();
  if (type == "INT32") return Load<int32_t>(i);
  if (type == "INT64") return Load<int64_t>(i);
  if (type == "UINT32") return Load<uint32_t>(i);
  return Load<uint64_t>(i);
}

absl::Status KServeInput::CheckTypedCount(size_t n) const {
  if (static_cast<int64_t>(n) == count_) return absl::OkStatus();
  return Invalid(
      name(), absl::StrCat("shape ", ShapeText(), " has ", count_, " elements, the contents ", n));
}

void AddKServeOutputs(const KServeOutputFormat& format,
                      absl::Span<const KServeChoiceOutput> choices,
                      inference::ModelInferResponse* response) {
  size_t longest = 0;
  for (const KServeChoiceOutput& choice : choices) longest = std::max(longest, choice.ids.size());
  for (const std::string& name : format.names) {
    inference::ModelInferResponse::InferOutputTensor* out = response->add_outputs();
    out->set_name(name);
    if (format.batch_dim) out->add_shape(1);
    if (name == "text_output") {
      out->set_datatype("BYTES");
      out->add_shape(static_cast<int64_t>(choices.size()));
      std::string* raw = format.raw ? response->add_raw_output_contents() : nullptr;
      for (const KServeChoiceOutput& choice : choices) {
        if (raw == nullptr) {
          out->mutable_contents()->add_bytes_contents(std::string(choice.text));
          continue;
        }
        const uint32_t length = static_cast<uint32_t>(choice.text.size());
        raw->append(reinterpret_cast<const char*>(&length), sizeof(length));
        raw->append(choice.text.data(), choice.text.size());
      }
      continue;
    }
    out->set_datatype("INT32");
    std::vector<int32_t> ids;
    if (format.choice_dim) {
      out->add_shape(static_cast<int64_t>(choices.size()));
      ids.reserve(choices.size() * longest);
    }
    out->add_shape(static_cast<int64_t>(longest));
    for (const KServeChoiceOutput& choice : choices) {
      ids.insert(ids.end(), choice.ids.begin(), choice.ids.end());
      ids.resize(ids.size() + longest - choice.ids.size(), -1);
    }
    if (format.raw) {
      response->add_raw_output_contents()->assign(reinterpret_cast<const char*>(ids.data()),
                                                  ids.size() * sizeof(int32_t));
    } else {
      out->mutable_contents()->mutable_int_contents()->Add(ids.begin(), ids.end());
    }
  }
}

}  // namespace convoy
