// Fair shares of the queue between clients of one priority level: start-time fair queueing with
// one unit of cost per request. Each new request gets a start tag: its client's previous finish
// tag, or the level's virtual time if that is later; its client's finish tag becomes the start
// tag plus one. Waiting requests start in order of their tags (then of arrival), and the level's
// virtual time follows the tags of the requests that start (held back to the lowest tag still
// waiting, see Arrive). A client that sends many requests at
// once queues them one tag apart, so another client's request, tagged at the virtual time, starts
// after at most one of each other client's, whatever their backlog; a lone client is served in
// arrival order.
//
// Pure bookkeeping; not thread-safe (the scheduler's).
#ifndef CONVOY_SCHEDULER_CLIENT_SHARE_H_
#define CONVOY_SCHEDULER_CLIENT_SHARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace convoy {

class ClientShare {
 public:
  explicit ClientShare(int32_t levels) : levels_(levels) {}

  // The start tag of a new request of `client` at `level` (1-based). `lowest_waiting`: the lowest
  // tag among the level's requests still waiting, if any. Requests need not start in tag order
  // (the scheduler may pick a shorter one from its length-grouping window first), so the virtual
  // time, the highest tag started, can run ahead of requests that are still waiting; a new client
  // then starts at the lowest waiting tag instead, not behind them.
  uint64_t Arrive(int32_t level, const std::string& client,
                  std::optional<uint64_t> lowest_waiting = std::nullopt);
  // A request of `level` with start tag `tag` started running.
  void Started(int32_t level, uint64_t tag);

 private:
  struct Level {
    uint64_t virtual_time = 0;
    // Finish tags of the clients seen; those at or below the virtual time are forgotten when the
    // map grows, since they would start at the virtual time anyway.
    absl::flat_hash_map<std::string, uint64_t> finish;
  };
  std::vector<Level> levels_;
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_CLIENT_SHARE_H_
