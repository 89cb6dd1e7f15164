#include "model/safetensors.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestDir;
using ::convoy::testing::WriteBytes;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::byte> Bytes(const void* data, size_t size) {
  std::vector<std::byte> bytes(size);
  std::memcpy(bytes.data(), data, size);
  return bytes;
}

std::vector<TensorToWrite> SampleTensors() {
  const float f32[6] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-3f, -7.0f};
  uint16_t f16[4], bf16[8];
  for (int i = 0; i < 4; ++i) f16[i] = FloatToFP16(0.5f * static_cast<float>(i) - 1.0f);
  for (int i = 0; i < 8; ++i) bf16[i] = FloatToBF16(static_cast<float>(i * i) - 3.0f);
  const float scalar = 42.0f;
  return {
      {"a.f32", DType::kF32, {2, 3}, Bytes(f32, sizeof(f32))},
      {"b.f16", DType::kF16, {4}, Bytes(f16, sizeof(f16))},
      {"c.bf16", DType::kBF16, {2, 2, 2}, Bytes(bf16, sizeof(bf16))},
      {"d.scalar", DType::kF32, {}, Bytes(&scalar, sizeof(scalar))},
      {"e.empty", DType::kF16, {0, 3}, {}},
  };
}

// A safetensors file from a header text (no padding) and `data_size` bytes of data.
std::string RawFile(const std::string& header, size_t data_size) {
  std::string file(8, '\0');
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>(length >> (8 * i));
  file += header;
  file.append(data_size, '\x11');
  return file;
}

TEST(SafetensorsTest, RoundTrip) {
  TestDir dir;
  const std::string path = dir.Join("t.safetensors");
  const std::vector<TensorToWrite> written = SampleTensors();
  ASSERT_OK(WriteSafetensors(path, written));

  const std::string raw = ReadBytes(path);
  ASSERT_GE(raw.size(), 8u);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) {
    header_length = (header_length << 8) | static_cast<unsigned char>(raw[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(raw.find("\"format\":\"pt\""), raw.find("\"format\""));  // metadata written

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_OK(file);
  EXPECT_EQ((*file)->path(), path);
  ASSERT_EQ((*file)->tensors().size(), written.size());  // "__metadata__" skipped
  for (const TensorToWrite& expected : written) {
    SCOPED_TRACE(expected.name);
    auto it = (*file)->tensors().find(expected.name);
    ASSERT_NE(it, (*file)->tensors().end());
    const TensorView& view = it->second;
    EXPECT_EQ(view.name, expected.name);
    EXPECT_EQ(view.file, path);
    EXPECT_EQ(view.dtype, expected.dtype);
    EXPECT_EQ(view.shape, expected.shape);
    ASSERT_EQ(view.num_bytes, expected.bytes.size());
    EXPECT_EQ(static_cast<size_t>(view.NumElements()) * static_cast<size_t>(DTypeSize(view.dtype)),
              view.num_bytes);
    if (view.num_bytes > 0) {
      EXPECT_EQ(std::memcmp(view.data, expected.bytes.data(), view.num_bytes), 0);
    }
  }
  const TensorView& f32 = (*file)->tensors().at("a.f32");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f32.data) % 8, 0u);  // first tensor, 8-aligned header
  float second;
  std::memcpy(&second, f32.data + 4, 4);
  EXPECT_EQ(second, -2.0f);
  EXPECT_EQ((*file)->tensors().at("d.scalar").NumElements(), 1);
  EXPECT_EQ((*file)->tensors().at("e.empty").NumElements(), 0);
}

TEST(SafetensorsTest, StreamingWriterMatchesTheVectorWriter) {
  TestDir dir;
  const std::vector<TensorToWrite> tensors = SampleTensors();
  ASSERT_OK(WriteSafetensors(dir.Join("a.safetensors"), tensors));
  std::vector<TensorSpec> specs;
  for (const TensorToWrite& tensor : tensors)
    specs.push_back({tensor.name, tensor.dtype, tensor.shape});
  std::vector<size_t> order;
  ASSERT_OK(WriteSafetensors(dir.Join("b.safetensors"), specs,
                             [&](size_t index, std::vector<std::byte>& bytes) {
                               order.push_back(index);
                               EXPECT_EQ(bytes.size(), tensors[index].bytes.size());
                               bytes = tensors[index].bytes;
                               return absl::OkStatus();
                             }));
  EXPECT_THAT(order, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(ReadBytes(dir.Join("a.safetensors")), ReadBytes(dir.Join("b.safetensors")));
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  TestDir dir;
  const std::string path = dir.Join("bad.safetensors");
  std::vector<TensorToWrite> tensors = SampleTensors();
  tensors[0].bytes.pop_back();
  EXPECT_THAT(
      WriteSafetensors(path, tensors),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("a.f32"), HasSubstr("expected 24 bytes"), HasSubstr("found 23"))));
  tensors = SampleTensors();
  tensors[1].name = "a.f32";
  EXPECT_THAT(WriteSafetensors(path, tensors),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'a.f32'")));
  EXPECT_FALSE(std::filesystem::exists(path));
  // A failing filler leaves no file behind.
  EXPECT_THAT(WriteSafetensors(path, {{"x", DType::kF32, {2}}},
                               [](size_t, std::vector<std::byte>&) {
                                 return absl::DataLossError("filler failed");
                               }),
              StatusIs(absl::StatusCode::kDataLoss, "filler failed"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SafetensorsTest, MissingFile) {
  TestDir dir;
  const std::string path = dir.Join("absent.safetensors");
  EXPECT_THAT(SafetensorsFile::Open(path), StatusIs(absl::StatusCode::kNotFound, HasSubstr(path)));
  EXPECT_THAT(SafetensorsFile::Open(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("regular file")));
}

struct MalformedCase {
  std::string description;
  std::string contents;
  absl::StatusCode code;
  std::vector<std::string> substrings;  // besides the path, each must be in the message
};

std::vector<MalformedCase> MalformedCases() {
  using absl::StatusCode;
  const std::string good = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  std::string huge_length(8, '\xff');
  huge_length += "{}";
  return {
      {"empty file", "", StatusCode::kInvalidArgument, {"8-byte header length", "0-byte file"}},
      {"shorter than the length", "abcde", StatusCode::kInvalidArgument, {"5-byte file"}},
      {"header past the end",
       RawFile(good, 16).substr(0, 30),
       StatusCode::kInvalidArgument,
       {"header length 57", "22 bytes"}},
      {"huge header length",
       huge_length,
       StatusCode::kInvalidArgument,
       {"header length 18446744073709551615"}},
      {"garbage header",
       RawFile("not json at all", 0),
       StatusCode::kInvalidArgument,
       {"not valid JSON"}},
      {"header not an object",
       RawFile("[1,2,3]", 0),
       StatusCode::kInvalidArgument,
       {"JSON object", "array"}},
      {"unsupported dtype",
       RawFile(R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16),
       StatusCode::kUnimplemented,
       {"tensor 'w'", "\"I64\"", "F32, F16 or BF16"}},
      {"missing dtype",
       RawFile(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "'dtype'", "found none"}},
      {"entry not an object",
       RawFile(R"({"w":7})", 0),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "found 7"}},
      {"negative dimension",
       RawFile(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "non-negative", "[-2]"}},
      {"offsets not a pair",
       RawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "data_offsets", "found [0]"}},
      {"offsets reversed",
       RawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "begin <= end", "[8, 4]"}},
      {"offsets past the data",
       RawFile(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 12),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "12-byte data section", "[0, 16]"}},
      {"size does not match the shape",
       RawFile(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "expected 12 bytes", "[2, 3]", "BF16", "(8 bytes)"}},
      {"shape overflows",
       RawFile(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor 'w'", "too large"}},
  };
}

TEST(SafetensorsTest, MalformedFilesGiveErrorsNamingFileAndTensor) {
  TestDir dir;
  int index = 0;
  for (const MalformedCase& bad : MalformedCases()) {
    SCOPED_TRACE(bad.description);
    const std::string path = dir.Join("bad" + std::to_string(index++) + ".safetensors");
    WriteBytes(path, bad.contents);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    EXPECT_THAT(file, StatusIs(bad.code, HasSubstr(path + ": ")));
    for (const std::string& substring : bad.substrings) {
      EXPECT_THAT(file, StatusIs(bad.code, HasSubstr(substring)));
    }
  }
}

TEST(SafetensorsTest, EveryTruncationIsAnErrorNotACrash) {
  TestDir dir;
  const std::string path = dir.Join("t.safetensors");
  ASSERT_OK(WriteSafetensors(path, SampleTensors()));
  const std::string whole = ReadBytes(path);
  const std::string cut_path = dir.Join("cut.safetensors");
  for (size_t length = 0; length < whole.size(); ++length) {
    WriteBytes(cut_path, whole.substr(0, length));
    EXPECT_THAT(SafetensorsFile::Open(cut_path),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(cut_path)))
        << "length " << length;
  }
  // Losing the last byte names the tensor that lies at the end of the data.
  WriteBytes(cut_path, whole.substr(0, whole.size() - 1));
  EXPECT_THAT(SafetensorsFile::Open(cut_path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'd.scalar'")));
}

TEST(SafetensorsTest, GarbageNeverCrashes) {
  TestDir dir;
  const std::string path = dir.Join("garbage.safetensors");
  const std::string valid = RawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  for (int trial = 0; trial < 300; ++trial) {
    std::string contents = valid;
    // Flip a few bytes (header length included), sometimes truncate.
    for (int flips = 1 + static_cast<int>(next() % 4); flips > 0; --flips) {
      contents[next() % contents.size()] = static_cast<char>(next());
    }
    if (next() % 3 == 0) contents.resize(next() % contents.size());
    WriteBytes(path, contents);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    if (!file.ok()) {
      EXPECT_THAT(file.status().message(), HasSubstr(path));
      continue;
    }
    for (const auto& [name, view] : (*file)->tensors()) {
      EXPECT_EQ(
          static_cast<size_t>(view.NumElements()) * static_cast<size_t>(DTypeSize(view.dtype)),
          view.num_bytes);
    }
  }
}

}  // namespace
}  // namespace convoy
