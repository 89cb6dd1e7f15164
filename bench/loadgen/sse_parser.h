// An incremental parser of server-sent events (the text/event-stream format of the HTML
// standard), fed a response body in whatever pieces the network delivers.
//
// Lines end at CR LF, LF or CR (a CR LF split across two pieces is one line end). "data:" lines
// accumulate the event's data (joined by LF, one space after the colon dropped), "event:" and
// "id:" set its type and id, lines starting with ':' are comments, other fields are ignored. A
// blank line dispatches the event, unless it had no data line.
#ifndef CONVOY_BENCH_LOADGEN_SSE_PARSER_H_
#define CONVOY_BENCH_LOADGEN_SSE_PARSER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace convoy::bench {

struct SseEvent {
  std::string event;  // the type; empty when not given ("message")
  std::string data;
  std::string id;

  bool operator==(const SseEvent& other) const {
    return event == other.event && data == other.data && id == other.id;
  }
};

class SseParser {
 public:
  // Appends every event that `bytes` completes to `events`.
  void Feed(absl::string_view bytes, std::vector<SseEvent>* events);

  // Bytes received of an event not yet complete (0 between events).
  size_t pending_bytes() const { return line_.size() + data_.size() + event_.size(); }

 private:
  void Line(absl::string_view line, std::vector<SseEvent>* events);

  std::string line_;       // the line so far
  bool after_cr_ = false;  // the last byte fed was a CR: an LF next is part of that line end
  std::string event_;
  std::string data_;
  std::string id_;
  bool has_data_ = false;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_SSE_PARSER_H_
