// Dequantization against gguf-py's (llama.cpp's Python package) for every supported type, on
// random blocks: scales over the whole finite fp16 range, quants of every bit pattern.
#include "model/gguf_dequantize.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"

namespace convoy {
namespace {

using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

std::string TypesDir() { return TestSourceDir() + "/tests/fixtures/gguf/types/"; }

struct TypeCase {
  std::string type, gguf, expected, tensor;
  std::vector<int64_t> shape;
};

std::vector<TypeCase> LoadManifest() {
  const nlohmann::json manifest = nlohmann::json::parse(ReadBytes(TypesDir() + "manifest.json"));
  std::vector<TypeCase> cases;
  for (const nlohmann::json& t : manifest["types"]) {
    cases.push_back(
        {t["type"], t["gguf"], t["expected"], t["tensor"], t["shape"].get<std::vector<int64_t>>()});
  }
  return cases;
}

TEST(GgufDequantizeTest, EveryTypeMatchesGgufPyBitForBit) {
  const std::vector<TypeCase> cases = LoadManifest();
  ASSERT_EQ(cases.size(), 13u);  // F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K Q2_K Q3_K
  for (const TypeCase& c : cases) {
    SCOPED_TRACE(c.type);
    auto file = GgufFile::Open(TypesDir() + c.gguf);
    ASSERT_OK(file);
    const GgufTensor* tensor = (*file)->FindTensor(c.tensor);
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(GgmlTypeName(tensor->type), c.type);
    ASSERT_EQ(tensor->shape, c.shape);
    EXPECT_TRUE(CanDequantize(tensor->type));

    const std::string expected_bytes = ReadBytes(TypesDir() + c.expected);
    ASSERT_EQ(expected_bytes.size(), static_cast<size_t>(tensor->NumElements()) * 4);
    std::vector<float> expected(static_cast<size_t>(tensor->NumElements()));
    std::memcpy(expected.data(), expected_bytes.data(), expected_bytes.size());

    const int64_t row_length = tensor->RowLength();
    std::vector<float> got(expected.size());
    for (int64_t r = 0; r < tensor->shape[0]; ++r) {
      ASSERT_OK(DequantizeRow(*tensor, r, got.data() + r * row_length));
    }
    double max_abs = 0.0, max_rel = 0.0;
    int64_t bit_differences = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_TRUE(std::isfinite(expected[i])) << i;
      const double diff = std::abs(static_cast<double>(got[i]) - expected[i]);
      max_abs = std::max(max_abs, diff);
      if (expected[i] != 0) max_rel = std::max(max_rel, diff / std::abs(expected[i]));
      bit_differences += std::memcmp(&got[i], &expected[i], 4) != 0;
    }
    std::cout << c.type << ": " << expected.size() << " values, " << bit_differences
              << " differ in any bit, max |diff| " << max_abs << ", max relative " << max_rel
              << "\n";
    EXPECT_EQ(bit_differences, 0);
    EXPECT_LE(max_rel, 1e-6);
  }
}

TEST(GgufDequantizeTest, RowsAndUnsupportedTypes) {
  auto file = GgufFile::Open(TypesDir() + "q4_k.gguf");
  ASSERT_OK(file);
  const GgufTensor& tensor = *(*file)->FindTensor("x");
  std::vector<float> row(static_cast<size_t>(tensor.RowLength()));
  EXPECT_THAT(DequantizeRow(tensor, 3, row.data()),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("tensor 'x': row 3 of 3")));
  GgufTensor q8k = tensor;
  q8k.type = static_cast<GgmlType>(15);
  EXPECT_FALSE(CanDequantize(q8k.type));
  EXPECT_THAT(DequantizeRow(q8k, 0, row.data()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("tensor 'x': type Q8_K is not supported")));
}

}  // namespace
}  // namespace convoy
