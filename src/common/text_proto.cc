#include "common/text_proto.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"

namespace convoy {
namespace {

using google::protobuf::TextFormat;

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(absl::string_view source) : source_(source) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    // The parser counts from 0.
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

}  // namespace

absl::Status ParseTextProto(absl::string_view text, absl::string_view source,
                            google::protobuf::Message* message, TextFormat::ParseInfoTree* tree) {
  CollectErrors errors(source);
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree);
  if (parser.ParseFromString(std::string(text), message)) return absl::OkStatus();
  if (errors.errors().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a valid ", message->GetDescriptor()->name()));
  }
  return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
}

absl::Status TextProtoLocator::Error(const FieldPath& path, absl::string_view reason) const {
  const google::protobuf::Descriptor* descriptor = type_;
  const TextFormat::ParseInfoTree* tree = tree_;
  std::vector<std::string> names;
  int line = -1;
  for (const FieldStep& step : path) {
    const google::protobuf::FieldDescriptor* field =
        descriptor == nullptr ? nullptr : descriptor->FindFieldByName(step.name);
    if (field == nullptr) break;
    // An index means something only on a repeated field.
    const bool indexed = field->is_repeated() && step.index >= 0;
    names.push_back(indexed ? absl::StrCat(step.name, "[", step.index, "]") : step.name);
    const int field_index = field->is_repeated() ? std::max(step.index, 0) : -1;
    if (tree != nullptr) {
      const auto location = tree->GetLocation(field, field_index);
      if (location.line >= 0) line = location.line + 1;
      tree =
          field->message_type() != nullptr ? tree->GetTreeForNested(field, field_index) : nullptr;
    }
    descriptor = field->message_type();
  }
  const std::string where = line > 0 ? absl::StrCat(source_, ":", line) : source_;
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", absl::StrJoin(names, "."), ": ", reason));
}

}  // namespace convoy
