#include "metrics/http_endpoint.h"

#include <atomic>
#include <string>

#include "gtest/gtest.h"
#include "metrics/http_get.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::HttpGet;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

TEST(HttpEndpointTest, ServesTheBodyOnItsPathAndNothingElse) {
  std::atomic<int> calls{0};
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, "/metrics",
                                      [&] { return "answer " + std::to_string(++calls) + "\n"; });
  ASSERT_OK(endpoint);
  const int port = (*endpoint)->port();
  ASSERT_GT(port, 0);
  auto first = HttpGet(port, "/metrics");
  ASSERT_OK(first);
  EXPECT_EQ(first->status_code, 200);
  EXPECT_EQ(first->body, "answer 1\n");
  auto second = HttpGet(port, "/metrics?x=1");
  ASSERT_OK(second);
  EXPECT_EQ(second->body, "answer 2\n") << "the body is made anew for every request";
  auto other = HttpGet(port, "/other");
  ASSERT_OK(other);
  EXPECT_EQ(other->status_code, 404);
  EXPECT_THAT(other->body, HasSubstr("/metrics"));
  EXPECT_EQ(calls.load(), 2);
}

TEST(HttpEndpointTest, RefusesABadAddressOrABusyPort) {
  EXPECT_THAT(HttpEndpoint::Start("not-an-address", 0, "/m", [] { return ""; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not-an-address")));
  auto first = HttpEndpoint::Start("127.0.0.1", 0, "/m", [] { return ""; });
  ASSERT_OK(first);
  EXPECT_THAT(HttpEndpoint::Start("127.0.0.1", (*first)->port(), "/m", [] { return ""; }),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot bind")));
}

}  // namespace
}  // namespace convoy
