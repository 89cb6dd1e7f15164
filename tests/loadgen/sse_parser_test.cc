#include "bench/loadgen/sse_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convoy::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

SseEvent Data(const std::string& data) {
  SseEvent e;
  e.data = data;
  return e;
}

// Feeds `stream` in pieces of `piece` bytes; returns every event.
std::vector<SseEvent> FeedInPieces(const std::string& stream, size_t piece) {
  SseParser parser;
  std::vector<SseEvent> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    parser.Feed(absl::string_view(stream).substr(i, piece), &events);
  }
  return events;
}

class SseParserTest : public ::testing::Test {
 protected:
  // Feeds `bytes`; returns every event so far.
  const std::vector<SseEvent>& Feed(const std::string& bytes) {
    parser_.Feed(bytes, &events_);
    return events_;
  }

  SseParser parser_;
  std::vector<SseEvent> events_;
};

TEST_F(SseParserTest, OneEventPerBlankLine) {
  EXPECT_THAT(Feed("data: {\"a\":1}\n\ndata: [DONE]\n\n"),
              ElementsAre(Data("{\"a\":1}"), Data("[DONE]")));
  EXPECT_EQ(parser_.pending_bytes(), 0u);
}

TEST_F(SseParserTest, EventsSplitAcrossReadsAtEveryByte) {
  const std::string stream =
      "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
      "data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n"
      "data: [DONE]\r\r";
  const std::vector<SseEvent> whole = FeedInPieces(stream, stream.size());
  ASSERT_THAT(whole, ElementsAre(Data("{\"choices\":[{\"text\":\"a\"}]}"),
                                 Data("{\"choices\":[{\"text\":\"b\"}]}"), Data("[DONE]")));
  for (size_t piece = 1; piece < 12; ++piece) {
    EXPECT_EQ(FeedInPieces(stream, piece), whole) << "pieces of " << piece;
  }
}

TEST_F(SseParserTest, NothingUntilTheBlankLine) {
  Feed("data: par");
  EXPECT_THAT(Feed("tial\n"), IsEmpty());
  EXPECT_GT(parser_.pending_bytes(), 0u);
  EXPECT_THAT(Feed("\n"), ElementsAre(Data("partial")));
}

TEST_F(SseParserTest, CrLfSplitBetweenReadsIsOneLineEnd) {
  Feed("data: x\r");
  EXPECT_THAT(Feed("\n"), IsEmpty());  // ends the same line, not a blank line
  Feed("\r");
  EXPECT_THAT(Feed("\n"), ElementsAre(Data("x")));
}

TEST_F(SseParserTest, MultiLineDataJoinedByNewlines) {
  // One space after the colon is dropped, no more.
  EXPECT_THAT(Feed("data: first\ndata:second\ndata:  third\n\n"),
              ElementsAre(Data("first\nsecond\n third")));
}

TEST_F(SseParserTest, EventTypeIdAndComments) {
  Feed(": keep-alive\n\nevent: error\nid: 7\nretry: 100\ndata: {\"error\":{}}\n\n");
  ASSERT_EQ(events_.size(), 1u);  // the comment alone dispatches nothing
  EXPECT_EQ(events_[0].event, "error");
  EXPECT_EQ(events_[0].id, "7");
  EXPECT_EQ(events_[0].data, "{\"error\":{}}");
  // The type does not carry over to the next event.
  ASSERT_EQ(Feed("data: next\n\n").size(), 2u);
  EXPECT_EQ(events_[1].event, "");
}

TEST_F(SseParserTest, EmptyDataLineStillDispatches) {
  EXPECT_THAT(Feed("data\n\nevent: only-a-type\n\ndata:\n\n"), ElementsAre(Data(""), Data("")));
}

}  // namespace
}  // namespace convoy::bench
