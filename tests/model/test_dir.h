// Scratch directories under ::testing::TempDir() (TEST_TMPDIR where set), each removed by the
// process that made it: one per test (TestDir) or one per process (ProcessDir); and whole-file
// helpers.
#ifndef CONVOY_TESTS_MODEL_TEST_DIR_H_
#define CONVOY_TESTS_MODEL_TEST_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

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

// TempDir()/<stem>_<pid>/, made empty on the first call with `stem` in this process and removed
// when the process exits: for what a whole test binary shares (a model written once, a PKI, a
// daemon's config), since ctest runs each test case as a process of its own and a suite run makes
// thousands of them. A process killed before its exit leaves its directory; CI's test runs check
// that nothing is left.
inline std::string ProcessDir(std::string_view stem) {
  struct Made {
    std::mutex mu;
    std::vector<std::string> paths;
    pid_t owner = getpid();
    ~Made() {
      if (getpid() != owner) return;  // a forked child that exits (a death test) leaves them
      std::error_code ignored;
      for (const std::string& path : paths) std::filesystem::remove_all(path, ignored);
    }
  };
  // Destroyed at exit, after any static object whose construction first called this function.
  static Made made;
  const std::string path = (std::filesystem::path(::testing::TempDir()) /
                            (std::string(stem) + "_" + std::to_string(getpid())))
                               .string();
  std::lock_guard<std::mutex> lock(made.mu);
  for (const std::string& known : made.paths) {
    if (known == path) return path;
  }
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
  std::filesystem::create_directories(path);
  made.paths.push_back(path);
  return path;
}

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
