// The defaults that proto/convoy/v1/server_config.proto's comments state ("Default 32.", "Default
// 64 MiB.", "filled as CONTINUOUS") are the ones FillServerConfigDefaults fills. The comments are
// read from protoc's source info (the build writes the schema's descriptor set with them), so a
// default changed in the code and not in the schema, or the other way round, fails here.
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "config/server_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "gtest/gtest.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorProto;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Comments by the full name of what they describe: a field's leading comment, an enum value's
// leading and trailing ones.
using Comments = std::map<std::string, std::string>;

void CollectMessage(const DescriptorProto& message, const std::string& scope,
                    std::vector<int32_t> path,
                    const std::map<std::vector<int32_t>, std::string>& by_path, Comments* out) {
  const std::string name = absl::StrCat(scope, ".", message.name());
  auto comment_at = [&](std::vector<int32_t> at) {
    auto it = by_path.find(at);
    return it == by_path.end() ? std::string() : it->second;
  };
  for (int f = 0; f < message.field_size(); ++f) {
    std::vector<int32_t> at = path;
    at.insert(at.end(), {DescriptorProto::kFieldFieldNumber, f});
    (*out)[absl::StrCat(name, ".", message.field(f).name())] = comment_at(at);
  }
  for (int e = 0; e < message.enum_type_size(); ++e) {
    for (int v = 0; v < message.enum_type(e).value_size(); ++v) {
      std::vector<int32_t> at = path;
      at.insert(at.end(), {DescriptorProto::kEnumTypeFieldNumber, e,
                           google::protobuf::EnumDescriptorProto::kValueFieldNumber, v});
      // Enum values are scoped beside their enum, in the message.
      (*out)[absl::StrCat(name, ".", message.enum_type(e).value(v).name())] = comment_at(at);
    }
  }
  for (int n = 0; n < message.nested_type_size(); ++n) {
    std::vector<int32_t> at = path;
    at.insert(at.end(), {DescriptorProto::kNestedTypeFieldNumber, n});
    CollectMessage(message.nested_type(n), name, at, by_path, out);
  }
}

Comments ReadSchemaComments() {
  const std::string path = TestBinaryDir() + "/proto/server_config.desc";
  std::ifstream in(path, std::ios::binary);
  google::protobuf::FileDescriptorSet set;
  EXPECT_TRUE(in && set.ParseFromIstream(&in)) << "cannot read " << path;
  Comments comments;
  for (const google::protobuf::FileDescriptorProto& file : set.file()) {
    if (!absl::EndsWith(file.name(), "server_config.proto")) continue;
    std::map<std::vector<int32_t>, std::string> by_path;
    for (const auto& location : file.source_code_info().location()) {
      std::string text = location.leading_comments() + " " + location.trailing_comments();
      absl::StrReplaceAll({{"\n", " "}}, &text);
      by_path[{location.path().begin(), location.path().end()}] = text;
    }
    for (int m = 0; m < file.message_type_size(); ++m) {
      CollectMessage(file.message_type(m), file.package(),
                     {google::protobuf::FileDescriptorProto::kMessageTypeFieldNumber, m}, by_path,
                     &comments);
    }
  }
  return comments;
}

// What a field's comment states as its default, as written ("32", "64 MiB", "\"127.0.0.1\"",
// "true"); "" when it states none. A described default ("Default: the lowest level") starts
// with ':'.
std::string StatedDefault(const std::string& comment) {
  static const std::regex kDefault(R"(Default(:?) ("[^"]*"|[^ ]+)( (GiB|MiB|KiB|seconds?)\b)?)");
  std::smatch match;
  if (!std::regex_search(comment, match, kDefault)) return "";
  if (!match[1].str().empty()) return absl::StrCat(":", comment.substr(match.position(0) + 9));
  std::string value = match[2].str();
  if (value.front() != '"') {
    while (!value.empty() && (value.back() == '.' || value.back() == ',' || value.back() == ';')) {
      value.pop_back();
    }
  }
  return match[4].matched ? absl::StrCat(value, " ", match[4].str()) : value;
}

// Compares a stated default with the field's filled value; "" when they agree, else why not.
std::string Disagreement(const Message& message, const FieldDescriptor& field,
                         const std::string& stated) {
  const Reflection& r = *message.GetReflection();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      const std::vector<std::string> parts = absl::StrSplit(stated, ' ');
      uint64_t number = 0;
      if (!absl::SimpleAtoi(parts[0], &number)) return "not a number";
      if (parts.size() == 2) {
        const std::string& unit = parts[1];
        if (unit == "GiB") number <<= 30;
        if (unit == "MiB") number <<= 20;
        if (unit == "KiB") number <<= 10;
        if (absl::StartsWith(unit, "second")) {
          if (!absl::EndsWith(field.name(), "_microseconds")) return "seconds on a field not in us";
          number *= 1000000;
        }
      }
      uint64_t filled = 0;
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT32) filled = r.GetInt32(message, &field);
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT64) filled = r.GetInt64(message, &field);
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
        filled = r.GetUInt32(message, &field);
      }
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64) {
        filled = r.GetUInt64(message, &field);
      }
      return filled == number ? "" : absl::StrCat("filled as ", filled);
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double number = 0;
      if (!absl::SimpleAtod(stated, &number)) return "not a number";
      const double filled = r.GetDouble(message, &field);
      return filled == number ? "" : absl::StrCat("filled as ", filled);
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const std::string filled = r.GetBool(message, &field) ? "true" : "false";
      return filled == stated ? "" : absl::StrCat("filled as ", filled);
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string filled = absl::StrCat("\"", r.GetString(message, &field), "\"");
      return filled == stated ? "" : absl::StrCat("filled as ", filled);
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const std::string filled = r.GetEnum(message, &field)->name();
      return filled == stated ? "" : absl::StrCat("filled as ", filled);
    }
    default:
      return "a field type this test does not read";
  }
}

struct Audit {
  std::set<std::string> checked;                 // stated and filled alike
  std::vector<std::string> problems;             // stated and filled differently, or unreadable
  std::set<std::string> unstated;                // optional, filled, and no default stated
  std::map<std::string, std::string> described;  // "Default: ..." in words
};

void AuditMessage(const Message& message, const Comments& comments, Audit* audit) {
  const Descriptor& d = *message.GetDescriptor();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& field = *d.field(i);
    if (field.is_repeated()) continue;  // an empty config has no entries to fill
    if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      AuditMessage(message.GetReflection()->GetMessage(message, &field), comments, audit);
      continue;
    }
    auto comment = comments.find(field.full_name());
    if (comment == comments.end()) {
      audit->problems.push_back(absl::StrCat(field.full_name(), ": not in the schema's comments"));
      continue;
    }
    std::string stated = StatedDefault(comment->second);
    if (stated.empty() && field.cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
      // An enum's default is written on its unset value: "filled as CONTINUOUS".
      const std::string& zero = field.enum_type()->value(0)->full_name();
      static const std::regex kFilledAs(R"(filled as ([A-Z_0-9]+))");
      std::smatch match;
      const std::string& text = comments.count(zero) ? comments.at(zero) : "";
      if (std::regex_search(text, match, kFilledAs)) stated = match[1].str();
    }
    if (stated.empty()) {
      if (field.has_presence()) audit->unstated.insert(field.full_name());
      continue;
    }
    if (stated.front() == ':') {
      audit->described[field.full_name()] = stated.substr(1);
      continue;
    }
    const std::string disagreement = Disagreement(message, field, stated);
    if (disagreement.empty()) {
      audit->checked.insert(field.full_name());
    } else {
      audit->problems.push_back(
          absl::StrCat(field.full_name(), ": the schema says ", stated, "; ", disagreement));
    }
  }
}

TEST(ConfigDocTest, EveryDefaultTheSchemaStatesIsTheOneFilled) {
  const Comments comments = ReadSchemaComments();
  ASSERT_FALSE(comments.empty());
  v1::ServerConfig config;
  FillServerConfigDefaults(&config);
  Audit audit;
  AuditMessage(config, comments, &audit);
  EXPECT_THAT(audit.problems, ::testing::IsEmpty()) << absl::StrJoin(audit.problems, "\n");
  // Each optional field states its default.
  EXPECT_THAT(audit.unstated, ::testing::IsEmpty()) << absl::StrJoin(audit.unstated, ", ");
  // The audit read the kinds of statement the schema has: plain, with a unit, quoted, an enum's.
  for (const char* field :
       {"convoy.v1.SchedulerConfig.max_batch_size", "convoy.v1.SchedulerConfig.mode",
        "convoy.v1.SchedulerConfig.priority_aging_microseconds",
        "convoy.v1.KvCacheConfig.memory_budget_bytes", "convoy.v1.FrontendConfig.listen_address",
        "convoy.v1.ExecutorConfig.gpu_memory_fraction", "convoy.v1.ExecutorConfig.cpu_weights",
        "convoy.v1.MetricsConfig.enabled"}) {
    EXPECT_TRUE(audit.checked.count(field)) << field;
  }
  // Defaults described in words, checked one by one.
  EXPECT_THAT(
      audit.described,
      ::testing::ElementsAre(::testing::Pair("convoy.v1.ModelSource.name", ::testing::_),
                             ::testing::Pair("convoy.v1.SchedulerConfig.default_priority_level",
                                             ::testing::StartsWith("the lowest level"))));
  EXPECT_EQ(config.scheduler().default_priority_level(), config.scheduler().priority_levels());
  v1::ServerConfig three_levels;
  three_levels.mutable_scheduler()->set_priority_levels(3);
  FillServerConfigDefaults(&three_levels);
  EXPECT_EQ(three_levels.scheduler().default_priority_level(), 3u);
}

// The reader itself: a changed default is caught.
TEST(ConfigDocTest, ADefaultChangedInTheCodeIsCaught) {
  const Comments comments = ReadSchemaComments();
  v1::ServerConfig config;
  FillServerConfigDefaults(&config);
  config.mutable_scheduler()->set_max_batch_size(config.scheduler().max_batch_size() + 1);
  config.mutable_frontend()->set_max_message_bytes(4 << 20);
  config.mutable_executor()->set_device(v1::ExecutorConfig::CPU);
  Audit audit;
  AuditMessage(config, comments, &audit);
  EXPECT_THAT(audit.problems,
              ::testing::UnorderedElementsAre(
                  ::testing::HasSubstr("SchedulerConfig.max_batch_size: the schema says 32"),
                  ::testing::HasSubstr("FrontendConfig.max_message_bytes: the schema says 64 MiB"),
                  ::testing::HasSubstr("ExecutorConfig.device: the schema says AUTO")));
}

}  // namespace
}  // namespace convoy::testing
