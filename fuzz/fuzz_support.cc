#include "fuzz_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace convoy::fuzz {
void Check(bool condition, std::string_view what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

const std::string& BytesAsFile(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("convoy-fuzz-input", MFD_CLOEXEC);
  static const std::string path = absl::StrCat("/proc/self/fd/", fd);
  Check(fd >= 0, "memfd_create failed");
  Check(ftruncate(fd, 0) == 0, "ftruncate failed");
  size_t written = 0;
  while (written < size) {
    ssize_t n = pwrite(fd, data + written, size - written, static_cast<off_t>(written));
    Check(n > 0, "pwrite failed");
    written += static_cast<size_t>(n);
  }
  return path;
}

}  // namespace convoy::fuzz
