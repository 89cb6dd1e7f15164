// Protobuf messages of the RPCs that take and give bytes (gRPC's raw callback methods). Those RPCs
// parse their requests here rather than in gRPC's generated code, which answers bytes that are not
// the request's message with UNIMPLEMENTED and no message; here they get INVALID_ARGUMENT naming
// the message they are not.
#ifndef CONVOY_FRONTEND_GRPC_BYTES_H_
#define CONVOY_FRONTEND_GRPC_BYTES_H_

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace convoy {

// Parses `bytes` into `*message`, replacing what it held; `bytes` is left as it was. On failure
// INVALID_ARGUMENT: "the request is not a valid TYPE (protobuf wire format...)", TYPE being the
// message's full name (convoy.v1.InferRequest).
absl::Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);

// `message` serialized into `*out`, replacing what it held.
void SerializeToBytes(const google::protobuf::Message& message, grpc::ByteBuffer* out);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_GRPC_BYTES_H_
