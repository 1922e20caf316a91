// The response reader fed as bytes arrive: a chunked body cut at every byte (chunk sizes and
// data split anywhere) comes out whole and in order, bytes past the end are left for the next
// response, a close-delimited body ends with the connection, and a cut or malformed one fails.
#include <string>

#include <gtest/gtest.h>

#include "client/response_reader.hpp"

using namespace conveyor::client;
using progress = response_reader::progress;

namespace {

// Two events of 12 and 13 bytes (0xc and 0xd), each a chunk.
const std::string chunked =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "c\r\ndata: Once\n\n\r\n"
    "d\r\ndata:  upon\n\n\r\n"
    "0\r\n\r\n";

}  // namespace

TEST(response_reader, a_chunked_body_fed_a_byte_at_a_time_comes_out_whole) {
  std::string body;
  int heads = 0;
  unsigned status = 0;
  response_reader reader{false, [&](const http_reply& head, std::string_view bytes) {
                           status = head.status;
                           if (bytes.empty()) ++heads;
                           body.append(bytes.data(), bytes.size());
                         }};
  const std::string next = "HTTP/1.1 204 No Content\r\n\r\n";
  const std::string bytes = chunked + next;
  progress got = progress::more;
  std::size_t i = 0;
  for (; i < bytes.size() && got == progress::more; ++i) got = reader.feed(bytes.substr(i, 1));
  ASSERT_EQ(got, progress::done) << reader.error();
  EXPECT_EQ(i, chunked.size());  // done on the response's last byte
  EXPECT_EQ(status, 200u);
  EXPECT_EQ(heads, 1);
  EXPECT_EQ(body, "data: Once\n\ndata:  upon\n\n");
  EXPECT_EQ(reader.reply().header("content-type"), "text/event-stream");

  // Fed at once with the next response behind it: that one is left over, whole.
  response_reader whole;
  ASSERT_EQ(whole.feed(bytes), progress::done);
  EXPECT_EQ(whole.reply().body, "data: Once\n\ndata:  upon\n\n");
  EXPECT_EQ(whole.leftover(), next);
}

TEST(response_reader, a_close_delimited_body_ends_with_the_connection) {
  response_reader reader;
  EXPECT_EQ(reader.feed("HTTP/1.1 200 OK\r\n\r\nsome"), progress::more);
  EXPECT_EQ(reader.feed(" text"), progress::more);
  ASSERT_EQ(reader.end_of_stream(), progress::done);
  EXPECT_EQ(reader.reply().body, "some text");
}

TEST(response_reader, a_cut_or_malformed_response_fails_naming_why) {
  response_reader cut;
  EXPECT_EQ(cut.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), progress::more);
  EXPECT_EQ(cut.end_of_stream(), progress::failed);
  EXPECT_EQ(cut.error(), "the server closed the connection");

  response_reader none;
  EXPECT_EQ(none.end_of_stream(), progress::failed);
  EXPECT_EQ(none.error(), "the server closed the connection before a response");

  response_reader bad;
  EXPECT_EQ(bad.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            progress::failed);
  EXPECT_NE(bad.error().find("malformed response"), std::string::npos) << bad.error();
}
