// convoy-mkmodel and convoy-run as a user runs them: real processes, their output parsed.
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"

namespace convoy {
namespace {

using ::convoy::testing::Execute;
using ::convoy::testing::JsonLines;
using ::convoy::testing::ProcessResult;

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(::convoy::testing::ProcessDir("convoy_cli_model") + "/model");
    const ProcessResult made = Execute(std::string(CONVOY_MKMODEL_PATH) +
                                       " --preset tiny --layers 2 --seed 3 --out " + *model_dir_);
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  static std::string RunCmd() { return std::string(CONVOY_RUN_PATH) + " --model " + *model_dir_; }
  static std::string* model_dir_;
};
std::string* CliTest::model_dir_ = nullptr;

TEST_F(CliTest, JsonHasOneObjectPerPromptWithTokensLogprobsAndFinishReason) {
  const ProcessResult run =
      Execute(RunCmd() + " --token-ids 1,2,3 --token-ids 9,8 --max-tokens 5 --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto lines = JsonLines(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  for (const auto& j : lines) {
    ASSERT_EQ(j["token_ids"].size(), 5u);
    ASSERT_EQ(j["logprobs"].size(), 5u);
    EXPECT_EQ(j["finish_reason"], "length");
    for (const auto& lp : j["logprobs"]) EXPECT_LE(lp.template get<double>(), 0.0);
  }
  // The first prompt alone gives the same tokens as in the batch.
  const ProcessResult alone = Execute(RunCmd() + " --token-ids 1,2,3 --max-tokens 5 --json");
  ASSERT_EQ(alone.exit_code, 0) << alone.out;
  EXPECT_EQ(JsonLines(alone.out)[0]["token_ids"], lines[0]["token_ids"]);
}

TEST_F(CliTest, SeededSamplingRepeats) {
  const std::string cmd =
      RunCmd() +
      " --token-ids 5,6,7 --max-tokens 8 --temperature 1.0 --top-k 50 --top-p 0.9 "
      "--seed 77 --json";
  const ProcessResult a = Execute(cmd);
  const ProcessResult b = Execute(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(JsonLines(a.out)[0]["token_ids"], JsonLines(b.out)[0]["token_ids"]);
}

TEST_F(CliTest, StopTokenEndsGeneration) {
  const ProcessResult first = Execute(RunCmd() + " --token-ids 4,4,4 --max-tokens 6 --json");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  const int stop = JsonLines(first.out)[0]["token_ids"][2].get<int>();
  const ProcessResult stopped =
      Execute(RunCmd() + " --token-ids 4,4,4 --max-tokens 6 --json --stop-token-ids " +
              std::to_string(stop));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.out;
  const auto j = JsonLines(stopped.out)[0];
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_EQ(j["token_ids"].back().get<int>(), stop);
}

TEST_F(CliTest, BadInputsFailWithAClearMessage) {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--token-ids 1,x,3", "must be comma-separated integers"},
      {"--token-ids 1,99999", "outside the vocabulary"},
      {"--token-ids 1 --top-p 0", "top_p"},
      {"--token-ids 1 --max-tokens 0", "max_tokens"},
      {"", "at least one prompt"},
      {"--token-ids 1 --weights int4", "--weights must be"},
  };
  for (const Case& c : cases) {
    const ProcessResult run = Execute(RunCmd() + " " + c.args);
    EXPECT_NE(run.exit_code, 0) << c.args;
    EXPECT_NE(run.out.find(c.message), std::string::npos) << c.args << " printed: " << run.out;
  }
  const ProcessResult missing =
      Execute(std::string(CONVOY_RUN_PATH) + " --model /nonexistent/model --token-ids 1");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("config.json"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace convoy
