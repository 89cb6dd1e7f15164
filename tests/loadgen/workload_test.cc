#include "bench/loadgen/workload.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_paths.h"
#include "tests/status_matchers.h"

namespace convoy::bench {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kMinimal[] = R"pb(
  arrival { closed_loop { concurrency: 4 } }
  request_class {
    name: "chat"
    prompt_tokens { fixed: 16 }
    output_tokens { uniform { min: 4 max: 8 } }
  }
)pb";

TEST(WorkloadTest, MinimalFileGetsDefaults) {
  absl::StatusOr<v1::Workload> w = ParseWorkload(kMinimal, "min.pbtxt");
  ASSERT_OK(w);
  EXPECT_EQ(w->arrival().closed_loop().concurrency(), 4);
  EXPECT_DOUBLE_EQ(w->duration_s(), 30);
  ASSERT_EQ(w->request_class_size(), 1);
  EXPECT_DOUBLE_EQ(w->request_class(0).weight(), 1);
}

TEST(WorkloadTest, OpenLoopDefaultsToPoisson) {
  absl::StatusOr<v1::Workload> w =
      ParseWorkload(R"pb(
                      arrival { open_loop { rate_rps: 2.5 } }
                      request_class {
                        name: "a"
                        prompt_tokens { lognormal { median: 10 sigma: 0.5 } }
                        output_tokens { fixed: 3 }
                      }
                    )pb",
                    "open.pbtxt");
  ASSERT_OK(w);
  EXPECT_EQ(w->arrival().open_loop().pattern(), v1::OpenLoop::POISSON);
  EXPECT_DOUBLE_EQ(w->arrival().open_loop().burstiness(), 0.25);
  EXPECT_EQ(w->request_class(0).prompt_tokens().lognormal().min(), 1);
  EXPECT_EQ(DescribeArrival(w->arrival()), "open loop, Poisson, 2.5 req/s");
}

TEST(WorkloadTest, SyntaxErrorNamesFileAndLine) {
  EXPECT_THAT(ParseWorkload("arrival {\n  closed_loop { concurrency: \"x\" }\n}\n", "bad.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.pbtxt:2:")));
  EXPECT_THAT(ParseWorkload("no_such_field: 1\n", "bad.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no_such_field")));
}

TEST(WorkloadTest, MissingArrivalIsRefused) {
  EXPECT_THAT(ParseWorkload(R"pb(request_class {
                                   name: "a"
                                   prompt_tokens { fixed: 1 }
                                   output_tokens { fixed: 1 }
                                 })pb",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("arrival: is required")));
}

TEST(WorkloadTest, BadValuesNameTheFieldAndLine) {
  EXPECT_THAT(ParseWorkload("arrival { open_loop { rate_rps: 0 } }\n"
                            "request_class { name: \"a\" prompt_tokens { fixed: 1 } "
                            "output_tokens { fixed: 1 } }\n",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("w.pbtxt:1: arrival.open_loop.rate_rps: must be above 0")));
  EXPECT_THAT(ParseWorkload("arrival { closed_loop { concurrency: 1 } }\n"
                            "request_class {\n"
                            "  name: \"a\"\n"
                            "  prompt_tokens { uniform { min: 10\n"
                            "    max: 5 } }\n"
                            "  output_tokens { fixed: 1 }\n"
                            "}\n",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("w.pbtxt:5: request_class[0].prompt_tokens.uniform.max: max 5 "
                                 "is below min 10")));
  EXPECT_THAT(ParseWorkload("arrival { open_loop { rate_rps: 1 pattern: BURSTY burstiness: 2 } }\n"
                            "request_class { name: \"a\" prompt_tokens { fixed: 1 } "
                            "output_tokens { fixed: 1 } }\n",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("burstiness")));
}

TEST(WorkloadTest, ClassesNeedUniqueNamesAndLengths) {
  EXPECT_THAT(ParseWorkload("arrival { closed_loop { concurrency: 1 } }\n"
                            "request_class { name: \"a\" prompt_tokens { fixed: 1 } "
                            "output_tokens { fixed: 1 } }\n"
                            "request_class { name: \"a\" prompt_tokens { fixed: 1 } "
                            "output_tokens { fixed: 1 } }\n",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("w.pbtxt:3: request_class[1].name: duplicate class name 'a'")));
  EXPECT_THAT(ParseWorkload("arrival { closed_loop { concurrency: 1 } }\n"
                            "request_class { name: \"a\" prompt_tokens { fixed: 1 } }\n",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request_class[0].output_tokens: is required")));
  EXPECT_THAT(ParseWorkload("arrival { closed_loop { concurrency: 1 } }\n", "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_class")));
  EXPECT_THAT(ParseWorkload("arrival { closed_loop { concurrency: 1 } }\n"
                            "request_class { name: \"a\" weight: -1 prompt_tokens { fixed: 1 } "
                            "output_tokens { fixed: 1 } }\n",
                            "w.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight: must be above 0")));
}

TEST(WorkloadTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadWorkload("/nonexistent/w.pbtxt"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/w.pbtxt")));
}

TEST(WorkloadTest, ShippedWorkloadsLoad) {
  for (const char* name : {"chat", "rag", "background", "mixed", "fairness"}) {
    absl::StatusOr<v1::Workload> w =
        LoadWorkload(TestSourceDir() + "/bench/workloads/" + name + ".pbtxt");
    ASSERT_OK(w);
    EXPECT_EQ(w->name(), name);
  }
  absl::StatusOr<v1::Workload> mixed =
      LoadWorkload(TestSourceDir() + "/bench/workloads/mixed.pbtxt");
  ASSERT_OK(mixed);
  EXPECT_EQ(mixed->request_class_size(), 3);
}

}  // namespace
}  // namespace convoy::bench
