// Protobuf text format (the form of Triton's config.pbtxt) with errors that point at the line:
// the parser's syntax errors as SOURCE:LINE:COLUMN, and a locator for the semantic errors that
// validation finds later, as SOURCE:LINE: field.path: reason.
#ifndef CONVOY_COMMON_TEXT_PROTO_H_
#define CONVOY_COMMON_TEXT_PROTO_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace convoy {

// Parses `text` into `message`, recording in `tree` where each field was written.
// INVALID_ARGUMENT with one "SOURCE:LINE:COLUMN: reason" line per syntax error.
absl::Status ParseTextProto(absl::string_view text, absl::string_view source,
                            google::protobuf::Message* message,
                            google::protobuf::TextFormat::ParseInfoTree* tree);

// One step of a field path: a field name and, for a repeated field, the element (-1: none; an
// index on a field that is not repeated is ignored).
struct FieldStep {
  const char* name;
  int index = -1;
};
using FieldPath = std::vector<FieldStep>;

// Points validation errors at the line where the field was written (or at the file alone when the
// field was left out and took its default).
class TextProtoLocator {
 public:
  // `tree` must outlive the locator.
  TextProtoLocator(const google::protobuf::Descriptor* type,
                   const google::protobuf::TextFormat::ParseInfoTree* tree,
                   absl::string_view source)
      : type_(type), tree_(tree), source_(source) {}

  // INVALID_ARGUMENT "SOURCE:LINE: a.b[2].c: reason".
  absl::Status Error(const FieldPath& path, absl::string_view reason) const;

 private:
  const google::protobuf::Descriptor* type_;
  const google::protobuf::TextFormat::ParseInfoTree* tree_;
  std::string source_;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_TEXT_PROTO_H_
