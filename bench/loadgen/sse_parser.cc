#include "bench/loadgen/sse_parser.h"

#include <utility>

namespace convoy::bench {

void SseParser::Feed(absl::string_view bytes, std::vector<SseEvent>* events) {
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // the LF of a CR LF whose line ended at the CR
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      Line(line_, events);
      line_.clear();
      continue;
    }
    line_.push_back(c);
  }
}

void SseParser::Line(absl::string_view line, std::vector<SseEvent>* events) {
  if (line.empty()) {
    if (has_data_) {
      SseEvent event;
      event.event = std::move(event_);
      event.data = std::move(data_);
      event.id = std::move(id_);
      events->push_back(std::move(event));
    }
    event_.clear();
    data_.clear();
    id_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment
  absl::string_view field = line, value;
  if (const size_t colon = line.find(':'); colon != absl::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value.data(), value.size());
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value.data(), value.size());
  } else if (field == "id") {
    id_.assign(value.data(), value.size());
  }
}

}  // namespace convoy::bench
