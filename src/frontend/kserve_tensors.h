// KServe v2 tensors on the wire: an input tensor's elements read from its typed contents or from
// its entry of raw_input_contents (little-endian elements; a BYTES element as a 4-byte length and
// its bytes), checked against its datatype and shape; convoy's outputs written the same two ways.
// Every refusal is INVALID_ARGUMENT starting with the tensor's name.
#ifndef CONVOY_FRONTEND_KSERVE_TENSORS_H_
#define CONVOY_FRONTEND_KSERVE_TENSORS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "inference/grpc_service.pb.h"

namespace convoy {

// Every integer datatype of the protocol (INT8 to UINT64) fits.
using KServeInteger = absl::int128;
std::string KServeIntegerText(KServeInteger value);

// One input tensor of a request. Refers to the request, which must outlive it.
class KServeInput {
 public:
  using Tensor = inference::ModelInferRequest::InferInputTensor;

  // `raw`: the tensor's entry of raw_input_contents; null when its data is in tensor.contents.
  // Checks the datatype exists, the shape, and the raw contents' size against the shape.
  static absl::StatusOr<KServeInput> Make(const Tensor& tensor, const std::string* raw);

  const std::string& name() const { return tensor_->name(); }
  const Tensor& tensor() const { return *tensor_; }
  // Elements, as the shape says.
  int64_t count() const { return count_; }
  int rank() const { return tensor_->shape_size(); }
  // "[1, 2]".
  std::string ShapeText() const;

  absl::Status CheckType(std::initializer_list<absl::string_view> allowed) const;
  absl::Status CheckOneElement() const;

  // The elements of an INT32, INT64, UINT32 or UINT64 tensor.
  absl::StatusOr<std::vector<KServeInteger>> Integers() const;
  // The one element of an FP32 or FP64 tensor.
  absl::StatusOr<double> Number() const;
  // The one element of a BOOL tensor.
  absl::StatusOr<bool> Bool() const;
  // The elements of a BYTES tensor.
  absl::StatusOr<std::vector<std::string>> Strings() const;

 private:
  KServeInput(const Tensor& tensor, const std::string* raw) : tensor_(&tensor), raw_(raw) {}

  template <typename T>
  T Load(int64_t i) const;
  KServeInteger RawInteger(int64_t i) const;
  absl::Status CheckTypedCount(size_t n) const;

  const Tensor* tensor_;
  const std::string* raw_;
  int64_t count_ = 1;
  std::vector<absl::string_view> strings_;  // the raw BYTES elements
};

// How a response's outputs are laid out.
struct KServeOutputFormat {
  // The outputs, in order: "text_output" and/or "output_ids".
  std::vector<std::string> names = {"text_output", "output_ids"};
  // In raw_output_contents (else in typed contents).
  bool raw = false;
  // With a leading batch dimension of 1.
  bool batch_dim = false;
  // The request has n > 1 choices: a dimension of n (after the batch dimension) that one choice
  // alone has not.
  bool choice_dim = false;
};

// One choice's output.
struct KServeChoiceOutput {
  absl::Span<const int32_t> ids;
  absl::string_view text;
};

// Appends the outputs `format` names to `response`. One choice (no choice_dim): text_output
// (BYTES, one element: its text) and output_ids (INT32, shape [length]: its ids). n choices
// (choice_dim): text_output of shape [n], and output_ids of shape [n, longest], each choice's
// row padded with -1 after its ids.
void AddKServeOutputs(const KServeOutputFormat& format,
                      absl::Span<const KServeChoiceOutput> choices,
                      inference::ModelInferResponse* response);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_KSERVE_TENSORS_H_
