#include "frontend/grpc_bytes.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace convoy {

absl::Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; parsing consumes the copy
  const grpc::Status status =
      grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&copy, message);
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", message->GetDescriptor()->full_name(),
                   " (protobuf wire format", status.error_message().empty() ? "" : ": ",
                   status.error_message(), ")"));
}

void SerializeToBytes(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  out->Clear();
  bool own_buffer = false;
  grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, out, &own_buffer)
      .IgnoreError();  // fails only for a message over 2 GiB, which no response is
}

}  // namespace convoy
