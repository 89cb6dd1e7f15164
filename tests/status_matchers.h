// StatusIs(code, message_matcher) for absl::Status and absl::StatusOr (abseil 20220623 has none).
#ifndef CONVOY_TESTS_STATUS_MATCHERS_H_
#define CONVOY_TESTS_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace convoy::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has status code ") + absl::StatusCodeToString(code)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code && ::testing::Matches(::testing::Matcher<const std::string&>(
                                      message_matcher))(std::string(status.message()));
}

}  // namespace convoy::testing

#define CONVOY_EXPECT_OK_IMPL_(check, expr)                  \
  do {                                                       \
    const auto& convoy_result_ = (expr);                     \
    check(::convoy::testing::GetStatus(convoy_result_).ok()) \
        << ::convoy::testing::GetStatus(convoy_result_);     \
  } while (false)
#define ASSERT_OK(expr) CONVOY_EXPECT_OK_IMPL_(ASSERT_TRUE, expr)
#define EXPECT_OK(expr) CONVOY_EXPECT_OK_IMPL_(EXPECT_TRUE, expr)

namespace convoy::testing {}  // namespace convoy::testing

#endif  // CONVOY_TESTS_STATUS_MATCHERS_H_
