// A main for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on each file
// named on the command line, or on each file in a named folder (sorted, not recursive). The
// ordinary build links every target with it and ctest replays the seed corpora
// (fuzz/corpus/<target>/), so a target that no longer compiles or links, or a seed that now
// crashes, fails `scripts/test.sh` and not only the clang-only fuzz build (CI's fuzz part once
// failed on a link error nobody had built).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool ReadFile(const std::filesystem::path& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code error;
    if (std::filesystem::is_directory(arg, error)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg, error)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      if (error) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", argv[i], error.message().c_str());
        return 1;
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else {
      inputs.push_back(arg);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs in the named folders\n");
    return 1;
  }
  std::string bytes;
  for (const auto& path : inputs) {
    if (!ReadFile(path, &bytes)) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    // The fuzz targets return 0 for every input they accept or refuse; anything else, like a crash
    // or a sanitizer report, is a finding.
    const int rc =
        LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (rc != 0) {
      std::fprintf(stderr, "replay: %s returned %d\n", path.c_str(), rc);
      return 1;
    }
  }
  std::printf("replay: %zu inputs ran\n", inputs.size());
  return 0;
}
