// A fresh directory per test under ::testing::TempDir(), and whole-file helpers.
#ifndef CONVOY_TESTS_MODEL_TEST_DIR_H_
#define CONVOY_TESTS_MODEL_TEST_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace convoy::testing {

// TempDir()/convoy_<suite>_<test>_<pid>_<n>/, emptied; removed by the destructor. Each object
// in a process gets its own directory.
class TestDir {
 public:
  TestDir() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("convoy_") + info->test_suite_name() + "_" + info->name() + "_" +
                       std::to_string(getpid()) + "_" + std::to_string(counter_++);
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = (std::filesystem::path(::testing::TempDir()) / name).string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TestDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_MODEL_TEST_DIR_H_
