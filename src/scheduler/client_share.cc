#include "scheduler/client_share.h"

#include <algorithm>

namespace convoy {
namespace {

// Clients a level remembers before it forgets those that are not ahead of the virtual time.
constexpr size_t kPruneAt = 4096;

}  // namespace

uint64_t ClientShare::Arrive(int32_t level, const std::string& client,
                             std::optional<uint64_t> lowest_waiting) {
  Level& l = levels_[level - 1];
  const uint64_t now = lowest_waiting ? std::min(l.virtual_time, *lowest_waiting) : l.virtual_time;
  if (l.finish.size() >= kPruneAt) {
    absl::erase_if(l.finish, [&l](const auto& entry) { return entry.second <= l.virtual_time; });
  }
  uint64_t& finish = l.finish[client];
  const uint64_t start = std::max(now, finish);
  finish = start + 1;
  return start;
}

void ClientShare::Started(int32_t level, uint64_t tag) {
  Level& l = levels_[level - 1];
  l.virtual_time = std::max(l.virtual_time, tag);
}

}  // namespace convoy
