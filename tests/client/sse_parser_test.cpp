// The SSE parser: events split from a stream that arrives in pieces, with every line end the
// event-stream format allows.
#include "client/sse_parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using conveyor::client::sse_parser;

TEST(sse_parser, handles_pieces_and_line_ends) {
  std::vector<std::string> events;
  sse_parser p{[&](const std::string& d) { events.push_back(d); }};
  const std::string stream =
      ": a comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: two\ndata: lines\n\ndata:[DONE]\r\r";
  for (char c : stream) p.feed(std::string_view{&c, 1});
  EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "two\nlines", "[DONE]"}));
  events.clear();
  sse_parser whole{[&](const std::string& d) { events.push_back(d); }};
  whole.feed(stream);
  EXPECT_EQ(events.size(), 3u);
}

TEST(sse_parser, an_event_without_its_blank_line_is_not_handed_over) {
  std::vector<std::string> events;
  sse_parser p{[&](const std::string& d) { events.push_back(d); }};
  p.feed("data: one\n\ndata: two\n");
  EXPECT_EQ(events, (std::vector<std::string>{"one"}));
  p.feed("\n");
  EXPECT_EQ(events, (std::vector<std::string>{"one", "two"}));
}

TEST(sse_parser, an_event_without_data_is_not_handed_over) {
  std::vector<std::string> events;
  sse_parser p{[&](const std::string& d) { events.push_back(d); }};
  p.feed("event: ping\nid: 3\n\n: keep-alive\n\ndata\n\n");
  // "data" with no colon is a data field with an empty value.
  EXPECT_EQ(events, (std::vector<std::string>{""}));
}
