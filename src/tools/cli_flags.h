// Command-line parsing shared by convoy's tools: absl flags spelled --like-this or --like_this,
// --name=value or --name value, --bool / --nobool, and flags that may repeat (collected in order).
// Bad usage prints "PROGRAM: message" on stderr and means exit code 2.
#ifndef CONVOY_TOOLS_CLI_FLAGS_H_
#define CONVOY_TOOLS_CLI_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

namespace convoy::cli {

constexpr int kBadUsage = 2;

struct CommandLine {
  std::string program;                // for messages
  std::string usage;                  // printed by --help above the flags
  std::vector<std::string> flags;     // absl flag names (with '_') this program accepts
  std::vector<std::string> repeated;  // names taken as repeatable values, not absl flags
};

struct ParsedFlags {
  std::set<std::string> specified;                         // absl flags given explicitly
  std::map<std::string, std::vector<std::string>> values;  // repeated flags, in order
};

// Sets the absl flags from argv. Returns -1 when the program should go on, otherwise the exit
// code (0 after --help, kBadUsage after a message).
int Parse(int argc, char** argv, const CommandLine& spec, ParsedFlags* parsed);

// Prints "PROGRAM: message" and a hint to stderr; returns kBadUsage.
int BadUsage(const CommandLine& spec, const std::string& message);

}  // namespace convoy::cli

#endif  // CONVOY_TOOLS_CLI_FLAGS_H_
