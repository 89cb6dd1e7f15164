// API keys: Bearer parsing, wrong and missing keys, the key file, the priority cap.
#include "frontend/api_keys.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "status_matchers.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

v1::FrontendConfig TwoKeys() {
  v1::FrontendConfig frontend;
  v1::ApiKey* ops = frontend.add_api_key();
  ops->set_name("ops");
  ops->set_key("ops-key-0123456789");
  ops->set_max_priority(1);
  v1::ApiKey* batch = frontend.add_api_key();
  batch->set_name("batch");
  batch->set_key("batch-key-0123456789");
  batch->set_max_priority(3);
  return frontend;
}

TEST(ApiKeysTest, NoKeysLetEveryoneIn) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  absl::StatusOr<Caller> caller = keys.Authenticate("");
  ASSERT_OK(caller);
  EXPECT_EQ(caller->max_priority, 1);
}

TEST(ApiKeysTest, ABearerKeyNamesItsCaller) {
  absl::StatusOr<std::shared_ptr<const ApiKeys>> keys = ApiKeys::FromConfig(TwoKeys(), 3);
  ASSERT_OK(keys);
  absl::StatusOr<Caller> caller = (*keys)->Authenticate("Bearer batch-key-0123456789");
  ASSERT_OK(caller);
  EXPECT_EQ(caller->key_name, "batch");
  EXPECT_EQ(caller->max_priority, 3);
  EXPECT_OK((*keys)->Authenticate("bearer ops-key-0123456789"));  // the scheme has no case
  EXPECT_THAT((*keys)->Authenticate(""),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no API key")));
  EXPECT_THAT((*keys)->Authenticate("Basic b3BzOm9wcw=="),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("not `Bearer KEY`")));
  EXPECT_THAT((*keys)->Authenticate("Bearer ops-key-012345678"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("not valid")));
  EXPECT_THAT((*keys)->Authenticate("Bearer ops-key-01234567890"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("not valid")));
}

TEST(ApiKeysTest, AKeyFileAddsKeysCheckedWithTheConfigs) {
  const std::string path = ProcessDir("convoy_api_keys") + "/keys.pbtxt";
  std::ofstream(path) << "api_key { name: \"file\" key: \"file-key-0123456789\" }\n";
  v1::FrontendConfig frontend = TwoKeys();
  frontend.set_api_key_file(path);
  absl::StatusOr<std::shared_ptr<const ApiKeys>> keys = ApiKeys::FromConfig(frontend, 3);
  ASSERT_OK(keys);
  EXPECT_EQ((*keys)->size(), 3);
  absl::StatusOr<Caller> caller = (*keys)->Authenticate("Bearer file-key-0123456789");
  ASSERT_OK(caller);
  EXPECT_EQ(caller->key_name, "file");
  EXPECT_EQ(caller->max_priority, 1);

  std::ofstream(path) << "api_key { name: \"ops\" key: \"another-key-0123456789\" }\n";
  EXPECT_THAT(ApiKeys::FromConfig(frontend, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ": api_key[0].name: the name 'ops' is taken")));
  std::ofstream(path) << "api_key { name: \"x\" \n";
  EXPECT_THAT(ApiKeys::FromConfig(frontend, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path + ":")));
  frontend.set_api_key_file(path + ".missing");
  EXPECT_THAT(
      ApiKeys::FromConfig(frontend, 3),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("frontend.api_key_file: cannot open")));
  std::remove(path.c_str());
}

TEST(CapPriorityTest, RefusesClaimsAboveTheCapAndLowersTheDefault) {
  Caller batch{"batch", 2};
  int32_t priority = 1;
  EXPECT_THAT(CapPriority(batch, 1, &priority),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("priority: 1 is higher than API key 'batch' may claim (2 or")));
  priority = 3;
  EXPECT_OK(CapPriority(batch, 1, &priority));
  EXPECT_EQ(priority, 3);
  priority = 0;  // the default level, 1, is above the cap: run at the cap
  EXPECT_OK(CapPriority(batch, 1, &priority));
  EXPECT_EQ(priority, 2);
  priority = 0;  // the default level, 3, is within it: left to the default
  EXPECT_OK(CapPriority(batch, 3, &priority));
  EXPECT_EQ(priority, 0);
  priority = 1;
  EXPECT_OK(CapPriority(Caller{}, 1, &priority));
}

}  // namespace
}  // namespace convoy::testing
