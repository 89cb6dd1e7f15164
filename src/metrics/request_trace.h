// convoyd's request trace (--request-trace FILE): one line per finished request, as JSON, for
// replaying the server's own traffic (convoy-bench --trace) and tuning for it:
//   {"arrival_s":12.503811,"prompt_tokens":412,"output_tokens":96,"priority":1,
//    "outcome":"complete_length"}
// arrival_s: seconds from the trace's start (convoyd opening the file) to the request's arrival at
// the front end; priority: the level it asked for, as its API key capped it (1 highest, 0: the
// server's default level); outcome: OutcomeName. Lines
// are written when requests end, so they are not in arrival order. Never the prompt's text or
// tokens, nor any identifier of the request or its client. Requests refused before the front end
// knew their prompt (authentication, a full server at the door) are not traced.
//
// Thread-safe: Record may be called from any thread; each line is flushed whole.
#ifndef CONVOY_METRICS_REQUEST_TRACE_H_
#define CONVOY_METRICS_REQUEST_TRACE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics/request_summary.h"

namespace convoy {

class RequestTrace {
 public:
  // Creates (or empties) `path`; arrival offsets count from `origin`. UNAVAILABLE naming the file
  // when it cannot be written.
  static absl::StatusOr<std::unique_ptr<RequestTrace>> Open(const std::string& path,
                                                            absl::Time origin);
  ~RequestTrace();

  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;

  // Appends the summary's line. A write error is logged once; the server serves on.
  void Record(const RequestSummary& summary);

  // The line of one request (without the newline).
  static std::string FormatLine(const RequestSummary& summary, absl::Time origin);

 private:
  RequestTrace(std::FILE* file, std::string path, absl::Time origin)
      : path_(std::move(path)), origin_(origin), file_(file) {}

  const std::string path_;
  const absl::Time origin_;
  absl::Mutex mu_;
  std::FILE* const file_ ABSL_PT_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy

#endif  // CONVOY_METRICS_REQUEST_TRACE_H_
