// Small filesystem helpers for the model module; errors name the path and the OS's reason.
#ifndef CONVOY_MODEL_FILE_UTIL_H_
#define CONVOY_MODEL_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy {

// The whole file. NOT_FOUND when it does not exist, other errors as the OS reports them.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` through a temporary file in the same directory renamed over it, so
// readers never see a partial file.
absl::Status WriteStringToFile(const std::string& path, absl::string_view contents);

// "dir/name", without doubling a trailing slash.
std::string JoinPath(absl::string_view dir, absl::string_view name);

bool PathExists(const std::string& path);

// An absl::Status for a failed system call on `path`, from errno.
absl::Status ErrnoToStatus(int error_number, absl::string_view path, absl::string_view what);

}  // namespace convoy

#endif  // CONVOY_MODEL_FILE_UTIL_H_
