// The GGUF reader against files that llama.cpp's own Python writer made (and what its reader reads
// back from them), and against malformed files: each gives a clear error, none crashes.
#include "model/gguf_file.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gguf_test_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"

namespace convoy {
namespace {

using ::convoy::testing::GgufBuilder;
using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestDir;
using ::convoy::testing::WriteBytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string FixturePath(const std::string& name) {
  return TestSourceDir() + "/tests/fixtures/gguf/" + name;
}

nlohmann::json LoadJson(const std::string& path) { return nlohmann::json::parse(ReadBytes(path)); }

absl::StatusOr<std::unique_ptr<GgufFile>> OpenBytes(const TestDir& dir, const std::string& bytes,
                                                    const std::string& name = "t.gguf") {
  WriteBytes(dir.Join(name), bytes);
  return GgufFile::Open(dir.Join(name));
}

// One F32 tensor "w" of 8 values after a string entry.
GgufBuilder SmallFile() {
  std::vector<float> values(8);
  for (int i = 0; i < 8; ++i) values[i] = 0.5f * static_cast<float>(i);
  GgufBuilder b;
  b.String("general.architecture", "llama").F32Tensor("w", {2, 4}, values);
  return b;
}

void ExpectValue(const GgufValue& value, const nlohmann::json& want, const std::string& key) {
  SCOPED_TRACE(key);
  const std::string type = want["type"].get<std::string>();
  const nlohmann::json& v = want["value"];
  ASSERT_EQ(GgufValueTypeName(value.type), [&] {
    std::string lower = type;
    for (char& c : lower) c = static_cast<char>(std::tolower(c));
    return lower;
  }());
  switch (value.type) {
    case GgufValueType::kString:
      EXPECT_EQ(std::string(value.string), v.get<std::string>());
      break;
    case GgufValueType::kBool:
      EXPECT_EQ(value.AsBool(), v.get<bool>());
      break;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      EXPECT_EQ(value.AsDouble(), v.get<double>());
      break;
    case GgufValueType::kUint64:
      EXPECT_EQ(value.scalar_bits, v.get<uint64_t>());
      break;
    case GgufValueType::kArray: {
      ASSERT_EQ(value.count, v.size());
      const std::string element = want["element_type"].get<std::string>();
      for (size_t i = 0; i < v.size(); ++i) {
        if (element == "STRING") {
          EXPECT_EQ(std::string(value.strings[i]), v[i].get<std::string>());
        } else if (element == "FLOAT32") {
          float f;
          std::memcpy(&f, value.elements + 4 * i, 4);
          EXPECT_EQ(f, v[i].get<double>());
        } else if (element == "BOOL") {
          EXPECT_EQ(value.elements[i] != std::byte{0}, v[i].get<bool>());
        } else if (element == "UINT64") {
          uint64_t u;
          std::memcpy(&u, value.elements + 8 * i, 8);
          EXPECT_EQ(u, v[i].get<uint64_t>());
        } else {
          EXPECT_EQ(value.ArrayInt(i), v[i].get<int64_t>()) << "element " << i;
        }
      }
      break;
    }
    default:
      EXPECT_EQ(value.AsInt(), v.get<int64_t>());
  }
}

TEST(GgufFileTest, ReadsWhatGgufPyWrote) {
  const nlohmann::json want = LoadJson(FixturePath("metadata.json"));
  auto file = GgufFile::Open(FixturePath("metadata.gguf"));
  ASSERT_OK(file);
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), want["version"].get<uint32_t>());
  EXPECT_EQ(f.alignment(), want["alignment"].get<uint64_t>());
  EXPECT_EQ(f.data_offset(), want["data_offset"].get<uint64_t>());
  ASSERT_EQ(f.metadata().size(), want["values"].size());
  for (const auto& [key, entry] : want["values"].items()) {
    const GgufValue* value = f.FindValue(key);
    ASSERT_NE(value, nullptr) << key;
    ExpectValue(*value, entry, key);
  }
  ASSERT_EQ(f.tensors().size(), want["tensors"].size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    const nlohmann::json& w = want["tensors"][i];
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(GgmlTypeName(t.type), w["type"].get<std::string>());
    EXPECT_EQ(t.shape, w["shape"].get<std::vector<int64_t>>()) << t.name;
    EXPECT_EQ(f.data_offset() + t.offset, w["file_offset"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.num_bytes, w["bytes"].get<uint64_t>()) << t.name;
    EXPECT_EQ(f.FindTensor(t.name), &t);
  }
  EXPECT_EQ(f.FindTensor("absent"), nullptr);
  EXPECT_EQ(f.FindValue("absent"), nullptr);

  // Beyond what the fixture pins down: conversions between the integer and float accessors.
  EXPECT_EQ(f.FindValue("test.u64")->AsInt(), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(f.FindValue("test.u64")->AsDouble(), 18000000000000000000.0);
  EXPECT_EQ(f.FindValue("test.i8")->AsDouble(), -100.0);
  EXPECT_EQ(f.FindValue("test.string")->AsInt(), std::nullopt);
  EXPECT_EQ(f.FindValue("test.u32")->AsBool(), std::nullopt);
  EXPECT_EQ(f.FindValue("test.array_string")->ArrayInt(0), std::nullopt);
  EXPECT_EQ(f.FindValue("test.array_i32")->ArrayInt(4), std::nullopt);
  EXPECT_EQ(f.FindValue("test.array_string")->Describe(), "array of 3 string");
  EXPECT_EQ(f.FindValue("test.i16")->Describe(), "int16 -30000");
}

// Every prefix shorter than the end of the last tensor's data is an error that says the file is
// truncated; every longer one (the writer pads the end) opens.
TEST(GgufFileTest, TruncatedAtEveryOffset) {
  const nlohmann::json want = LoadJson(FixturePath("metadata.json"));
  const std::string bytes = ReadBytes(FixturePath("metadata.gguf"));
  const size_t required = want["required_bytes"].get<size_t>();
  ASSERT_EQ(bytes.size(), want["file_bytes"].get<size_t>());
  ASSERT_LE(required, bytes.size());
  TestDir dir;
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto file = OpenBytes(dir, bytes.substr(0, n));
    if (n < required) {
      EXPECT_THAT(file, StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr(dir.Join("t.gguf")), HasSubstr("truncated"))))
          << "prefix of " << n << " bytes";
    } else {
      EXPECT_OK(file);
    }
  }
}

TEST(GgufFileTest, BuilderFileOpensAndEndsAtItsData) {
  TestDir dir;
  const std::string bytes = SmallFile().Build();
  auto file = OpenBytes(dir, bytes);
  ASSERT_OK(file);
  const GgufTensor* w = (*file)->FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ((*file)->data_offset() + w->num_bytes, bytes.size());
  float last;
  std::memcpy(&last, w->data + 28, 4);
  EXPECT_EQ(last, 3.5f);
  EXPECT_THAT(OpenBytes(dir, bytes.substr(0, bytes.size() - 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tensor 'w': data [0, 32)"), HasSubstr("truncated"))));
}

TEST(GgufFileTest, BadMagicAndVersion) {
  TestDir dir;
  EXPECT_THAT(OpenBytes(dir, SmallFile().Magic("GGML").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a GGUF file: expected the magic \"GGUF\", found \"GGML\"")));
  EXPECT_THAT(OpenBytes(dir, "{\"a\": 1}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a GGUF file")));
  EXPECT_THAT(
      OpenBytes(dir, ""),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("truncated: the magic \"GGUF\" needs 4 bytes at offset 0, found 0")));
  for (uint32_t version : {0u, 1u, 4u}) {
    EXPECT_THAT(
        OpenBytes(dir, SmallFile().Version(version).Build()),
        StatusIs(absl::StatusCode::kUnimplemented,
                 HasSubstr(absl::StrCat("unsupported GGUF version ", version, ", expected 3"))));
  }
  EXPECT_THAT(OpenBytes(dir, SmallFile().Version(0x03000000).Build()),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("big-endian")));
  EXPECT_OK(OpenBytes(dir, SmallFile().Version(2).Build()));
}

TEST(GgufFileTest, UnknownTypes) {
  TestDir dir;
  EXPECT_THAT(OpenBytes(dir, SmallFile().Raw("k", 13, "").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'k': unknown value type 13, expected 0 to 12")));
  EXPECT_THAT(
      OpenBytes(dir,
                SmallFile().Raw("k", 9, GgufBuilder::Le(77, 4) + GgufBuilder::Le(1, 8)).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key 'k': unknown array element type 77")));
  EXPECT_THAT(
      OpenBytes(dir,
                SmallFile().Raw("k", 9, GgufBuilder::Le(9, 4) + GgufBuilder::Le(1, 8)).Build()),
      StatusIs(absl::StatusCode::kUnimplemented,
               HasSubstr("key 'k': arrays of arrays are not supported")));
  for (uint32_t type : {4u, 31u, 99u}) {  // two numbers ggml retired, one it never used
    EXPECT_THAT(
        OpenBytes(dir, SmallFile().Tensor("q", type, {1, 32}, std::string(18, '\0')).Build()),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr(absl::StrCat("tensor 'q': unknown tensor type ", type))));
  }
}

TEST(GgufFileTest, TensorDataOutOfRange) {
  TestDir dir;
  EXPECT_THAT(OpenBytes(dir, SmallFile().Tensor("far", 0, {4}, "", 1 << 20).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'far': data [1048576, 1048592)")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().Tensor("wrap", 0, {4}, "", ~uint64_t{31}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tensor 'wrap'"), HasSubstr("beyond the file"))));
  EXPECT_THAT(OpenBytes(dir, SmallFile().Tensor("odd", 0, {4}, std::string(16, '\0'), 8).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'odd': data offset 8 is not a multiple of the "
                                 "alignment 32")));
  // Shape and size: the byte count follows from the shape, so data missing from a tensor that
  // claims more rows reads as data beyond the end.
  EXPECT_THAT(
      OpenBytes(dir,
                SmallFile().RemoveTensor("w").Tensor("w", 0, {3, 4}, std::string(32, 'x')).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'w': data [0, 48)")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().Tensor("q", 8, {2, 40}, std::string(68, '\0')).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'q': rows of 40 values are not whole Q8_0 blocks of 32")));
  EXPECT_THAT(
      OpenBytes(dir,
                SmallFile().Tensor("big", 0, {uint64_t{1} << 40, uint64_t{1} << 40}, "").Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("tensor 'big': shape [1099511627776, 1099511627776] has more than "
                         "2^63 elements")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().Tensor("rank5", 0, {1, 1, 1, 1, 1}, "").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'rank5': expected at most 4 dimensions, found 5")));
  // Empty tensors take no bytes and may sit anywhere.
  EXPECT_OK(OpenBytes(dir, SmallFile().Tensor("empty", 0, {0, 4}, "", 1 << 20).Build()));
}

TEST(GgufFileTest, AlignmentAndDuplicates) {
  TestDir dir;
  auto aligned = OpenBytes(dir, SmallFile().Alignment(256).Build());
  ASSERT_OK(aligned);
  EXPECT_EQ((*aligned)->alignment(), 256u);
  EXPECT_EQ((*aligned)->data_offset() % 256, 0u);
  EXPECT_THAT(OpenBytes(dir, SmallFile().U32("general.alignment", 48).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'general.alignment': expected a uint32 power of two, found "
                                 "uint32 48")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().U64("general.alignment", 32).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("found uint64 32")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().U32("general.alignment", 0).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("general.alignment")));
  // The builder replaces a key it is given twice; write the duplicate by hand.
  std::string twice = SmallFile().Build();
  {
    GgufBuilder b;
    b.U32("a", 1).U32("b", 2).F32Tensor("w", {1}, {1.0f});
    twice = b.Build();
    const std::string key_b = GgufBuilder::Str("b");
    twice.replace(twice.find(key_b), key_b.size(), GgufBuilder::Str("a"));
  }
  EXPECT_THAT(OpenBytes(dir, twice),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key 'a' appears twice")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().F32Tensor("w", {1}, {1.0f}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'w' appears twice")));
}

// Counts larger than the file could hold are refused before anything is reserved for them.
TEST(GgufFileTest, HugeCounts) {
  TestDir dir;
  const std::string header = "GGUF" + GgufBuilder::Le(3, 4);
  EXPECT_THAT(
      OpenBytes(dir, header + GgufBuilder::Le(0, 8) + GgufBuilder::Le(uint64_t{1} << 62, 8)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("declares 4611686018427387904 metadata entries")));
  EXPECT_THAT(OpenBytes(dir, header + GgufBuilder::Le(~uint64_t{0}, 8) + GgufBuilder::Le(0, 8)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated")));
  EXPECT_THAT(
      OpenBytes(dir, SmallFile()
                         .Raw("s", 9, GgufBuilder::Le(8, 4) + GgufBuilder::Le(~uint64_t{0} / 2, 8))
                         .Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key 's' declares 9223372036854775807 strings")));
  EXPECT_THAT(
      OpenBytes(dir,
                SmallFile()
                    .Raw("u", 9, GgufBuilder::Le(10, 4) + GgufBuilder::Le(uint64_t{1} << 61, 8))
                    .Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key 'u' declares 2305843009213693952 elements of uint64")));
  EXPECT_THAT(OpenBytes(dir, SmallFile().Raw("long", 8, GgufBuilder::Le(~uint64_t{0}, 8)).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("truncated: the value of key 'long' needs 18446744073709551615 "
                                 "bytes")));
}

TEST(GgufFileTest, NotAFile) {
  TestDir dir;
  EXPECT_THAT(GgufFile::Open(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected a GGUF file, found a directory")));
  EXPECT_THAT(GgufFile::Open(dir.Join("absent.gguf")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("absent.gguf")));
}

// Random corruption of the header and metadata: every result is a file or an error, never a
// crash (run under a sanitizer to see more than crashes).
TEST(GgufFileTest, RandomCorruptionNeverCrashes) {
  const std::string bytes = ReadBytes(FixturePath("metadata.gguf"));
  const nlohmann::json want = LoadJson(FixturePath("metadata.json"));
  const size_t header_end = want["data_offset"].get<size_t>();
  TestDir dir;
  std::mt19937_64 rng(42);
  int opened = 0, failed = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string corrupt = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      const size_t at = rng() % header_end;
      corrupt[at] = static_cast<char>(trial % 3 == 0 ? (corrupt[at] ^ (1 << (rng() % 8)))
                                                     : static_cast<char>(rng()));
    }
    auto file = OpenBytes(dir, corrupt);
    if (file.ok()) {
      ++opened;
      for (const GgufTensor& t : (*file)->tensors()) {
        // Every tensor's bytes lie inside the file.
        if (t.num_bytes == 0) continue;
        EXPECT_LE((*file)->data_offset() + t.offset + t.num_bytes, corrupt.size()) << t.name;
      }
    } else {
      ++failed;
      EXPECT_FALSE(file.status().message().empty());
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace convoy
