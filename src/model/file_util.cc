#include "model/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace convoy {

absl::Status ErrnoToStatus(int error_number, absl::string_view path, absl::string_view what) {
  std::string message = absl::StrCat(path, ": cannot ", what, ": ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case ENOMEM:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path, "open");
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      int error_number = errno;
      close(fd);
      return ErrnoToStatus(error_number, path, "read");
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return contents;
}

absl::Status WriteStringToFile(const std::string& path, absl::string_view contents) {
  const std::string temp_path = absl::StrCat(path, ".tmp");
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr) return ErrnoToStatus(errno, temp_path, "create");
  bool ok = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  int error_number = errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    error_number = errno;
  }
  if (!ok) {
    std::remove(temp_path.c_str());
    return ErrnoToStatus(error_number, temp_path, "write");
  }
  if (std::rename(temp_path.c_str(), path.c_str()) != 0) {
    error_number = errno;
    std::remove(temp_path.c_str());
    return ErrnoToStatus(error_number, path, "replace");
  }
  return absl::OkStatus();
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

bool PathExists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

}  // namespace convoy
