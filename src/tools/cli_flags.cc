#include "tools/cli_flags.h"

#include <cstdio>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace convoy::cli {
namespace {

std::string Dashed(const std::string& name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

void PrintHelp(const CommandLine& spec) {
  std::printf("%s\n\n", spec.usage.c_str());
  for (const std::string& name : spec.repeated) {
    std::printf("  --%-20s (may be repeated)\n", Dashed(name).c_str());
  }
  for (const std::string& name : spec.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    const std::string def = flag->DefaultValue();
    std::printf("  --%-20s %s%s\n", Dashed(name).c_str(), flag->Help().c_str(),
                def.empty() ? "" : absl::StrCat(" (default: ", def, ")").c_str());
  }
}

}  // namespace

int BadUsage(const CommandLine& spec, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", spec.program.c_str(), message.c_str(),
               spec.program.c_str());
  return kBadUsage;
}

int Parse(int argc, char** argv, const CommandLine& spec, ParsedFlags* parsed) {
  const std::set<std::string> ours(spec.flags.begin(), spec.flags.end());
  const std::set<std::string> repeated(spec.repeated.begin(), spec.repeated.end());
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "-help" || arg == "--helpfull") {
      PrintHelp(spec);
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      return BadUsage(spec, absl::StrCat("unexpected argument '", arg, "'"));
    }
    arg.erase(0, arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    std::string name = absl::StrReplaceAll(arg.substr(0, equals), {{"-", "_"}});
    bool has_value = equals != std::string::npos;
    std::string value = has_value ? arg.substr(equals + 1) : "";
    auto take_value = [&]() -> bool {
      if (has_value) return true;
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    if (repeated.count(name)) {
      if (!take_value()) return BadUsage(spec, absl::StrCat("flag '", argv[i], "' needs a value"));
      parsed->values[name].push_back(value);
      continue;
    }
    absl::CommandLineFlag* flag = ours.count(name) ? absl::FindCommandLineFlag(name) : nullptr;
    if (flag == nullptr && !has_value && name.rfind("no", 0) == 0 && ours.count(name.substr(2))) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag == nullptr || !flag->IsOfType<bool>()) {
        return BadUsage(spec, absl::StrCat("unknown flag '", argv[i], "'"));
      }
      name = name.substr(2);
      value = "false";
      has_value = true;
    }
    if (flag == nullptr) return BadUsage(spec, absl::StrCat("unknown flag '", argv[i], "'"));
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (!take_value()) {
        return BadUsage(spec, absl::StrCat("flag '", argv[i], "' needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return BadUsage(
          spec, absl::StrCat("invalid value '", value, "' for --", Dashed(name), ": ", error));
    }
    parsed->specified.insert(name);
  }
  return -1;
}

}  // namespace convoy::cli
