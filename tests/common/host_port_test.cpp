// "HOST:PORT" addresses.
#include "common/host_port.hpp"

#include <gtest/gtest.h>

using conveyor::parse_host_port;

TEST(host_port, host_and_port_ipv6_in_brackets) {
  auto a = parse_host_port("127.0.0.1:7001");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7001);
  auto b = parse_host_port("[::1]:80");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 80);
  auto c = parse_host_port("localhost:65535");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->port, 65535);
}

TEST(host_port, anything_else_is_refused) {
  for (const char* bad : {"host", "host:", ":80", "[]:80", "host:0", "host:65536", "host:8o",
                          "host:123456", "host:-1"})
    EXPECT_FALSE(parse_host_port(bad)) << bad;
  // A listener may ask for any free port.
  auto any = parse_host_port("127.0.0.1:0", 0);
  ASSERT_TRUE(any);
  EXPECT_EQ(any->port, 0);
}
