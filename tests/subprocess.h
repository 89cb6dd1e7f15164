// Runs a command line as a user would and reads what it printed: for tests of the command-line
// tools. Not for untrusted input (the line goes to the shell).
#ifndef CONVOY_TESTS_SUBPROCESS_H_
#define CONVOY_TESTS_SUBPROCESS_H_

#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace convoy::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  std::string out;
};

// Runs `command` through the shell; `out` holds its stdout, and its stderr too when
// `with_stderr` (otherwise stderr is discarded).
inline ProcessResult Execute(const std::string& command, bool with_stderr = true) {
  ProcessResult run;
  FILE* pipe = popen((command + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.out.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// The lines of `text` that are JSON objects, parsed.
inline std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SUBPROCESS_H_
