// A cap on how far this process's address space may still grow, for a death test's child: code
// that would allocate far more than it should then fails at once (std::bad_alloc, or a
// sanitizer's out-of-memory report) instead of slowly taking the machine's memory.
#ifndef CONVOY_TESTS_MODEL_ADDRESS_SPACE_H_
#define CONVOY_TESTS_MODEL_ADDRESS_SPACE_H_

#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>

namespace convoy::testing {

// Sets RLIMIT_AS to what is mapped now (/proc/self/statm) plus `headroom` bytes; false when
// either step fails.
inline bool LimitAddressSpaceGrowth(size_t headroom) {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  if (!(statm >> pages)) return false;
  rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0) return false;
  limit.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) +
                   static_cast<rlim_t>(headroom);
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_MODEL_ADDRESS_SPACE_H_
