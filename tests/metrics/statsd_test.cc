// metrics/statsd.h: EXTRA_TAGS read and written as gostats writes them, lines and datagrams as statsd daemons read
// them, deltas between flushes; and (StatsdSink, live: a UDP socket on loopback) the datagrams sent and lost.
#include "metrics/statsd.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <sstream>

namespace rk::metrics::statsd {
namespace {

std::vector<std::string> tag_text(const std::vector<Tag>& tags) {
  std::vector<std::string> out;
  for (const Tag& t : tags) out.push_back(t.key + "=" + t.value);
  return out;
}

TEST(StatsdTags, ReadAsUpstreamsExtraTagsSortedByKeyTheLastOfAKeyWinning) {
  std::string error;
  auto tags = parse_tags("zone:a, env:prod,zone:b", error);
  ASSERT_TRUE(tags) << error;
  EXPECT_EQ(tag_text(*tags), (std::vector<std::string>{"env=prod", "zone=b"}));
  EXPECT_TRUE(parse_tags("", error)->empty());
}

TEST(StatsdTags, AnEntryWithoutKeyColonOrValueIsRefusedByName) {
  for (const char* bad : {"env", "env:prod,zone", ":prod", "env:", "env:prod,,zone:a"}) {
    std::string error;
    EXPECT_FALSE(parse_tags(bad, error)) << bad;
    EXPECT_NE(error.find("is not key:value"), std::string::npos) << bad << ": " << error;
  }
  std::string error;
  parse_tags("env:prod,zone", error);
  EXPECT_EQ(error, "'zone' is not key:value");
}

// gostats' TagSet.Serialize: ".__key=value" per tag; ReplaceChars makes '.', ':' and '|' in values '_'.
TEST(StatsdTags, AppendedToTheNameAsGostatsSerializesThem) {
  std::string error;
  const auto tags = parse_tags("zone:eu.west:1|a,env:prod", error);
  EXPECT_EQ(tagged_name("ratelimit.service.config_load_success", *tags),
            "ratelimit.service.config_load_success.__env=prod.__zone=eu_west_1_a");
  EXPECT_EQ(tagged_name("a.b", {}), "a.b");
}

TEST(StatsdLines, CounterGaugeAndTimerInGostatsFormat) {
  std::string out;
  append_counter(out, "ratelimit.service.rate_limit.d.k_v.total_hits", 3);
  append_gauge(out, "g", 2.5);
  append_timer(out, "ratelimit_server.ShouldRateLimit.response_time", 0.25, 1);
  EXPECT_EQ(out,
            "ratelimit.service.rate_limit.d.k_v.total_hits:3|c\n"
            "g:2.5|g\n"
            "ratelimit_server.ShouldRateLimit.response_time:0.25|ms\n");
}

// Five samples are a line of four ("@0.25") and a line of one; every rate a power of two, in fixed notation (Etsy's
// statsd reads /^@([\d\.]+)/) that reads back as exactly that power, so that 1/rate is the count in both daemons.
TEST(StatsdLines, ATimersSamplesAreOneLinePerPowerOfTwoWithExactRates) {
  std::string out;
  append_timer(out, "t", 0.001, 5);
  EXPECT_EQ(out, "t:0.001|ms|@0.25\nt:0.001|ms\n");
  out.clear();
  append_timer(out, "t", 1000, (std::uint64_t{1} << 40) + 2);
  EXPECT_EQ(out, "t:1000|ms|@0.0000000000009094947017729282\nt:1000|ms|@0.5\n");  // 2^-40, shortest
  // Summed the way a daemon does: each line counts 1/rate samples.
  double samples = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("|@");
    EXPECT_EQ(line.find_first_of("eE", at == std::string::npos ? line.size() : at), std::string::npos) << line;
    samples += at == std::string::npos ? 1.0 : 1.0 / std::stod(line.substr(at + 2));
  }
  EXPECT_EQ(samples, std::ldexp(1.0, 40) + 2);
}

TEST(StatsdLines, PackedIntoDatagramsOfWholeLinesWithinTheSize) {
  std::string lines;
  for (int i = 0; i < 200; ++i) {
    append_counter(lines, "ratelimit.service.rate_limit.domain.key_" + std::to_string(i), 1);
  }
  const auto datagrams = pack(lines, kMaxDatagramBytes);
  ASSERT_GT(datagrams.size(), 1u);
  std::string joined;
  for (const std::string& d : datagrams) {
    EXPECT_LE(d.size(), kMaxDatagramBytes);
    EXPECT_EQ(d.back(), '\n');
    joined += d;
  }
  EXPECT_EQ(joined, lines);
  // A line longer than a datagram goes alone, whole.
  const std::string long_line = std::string(2000, 'x') + ":1|c\n";
  EXPECT_EQ(pack("a:1|c\n" + long_line + "b:1|c\n", kMaxDatagramBytes),
            (std::vector<std::string>{"a:1|c\n", long_line, "b:1|c\n"}));
}

TEST(StatsdAddress, HostPortOrBracketedV6) {
  std::string host;
  std::uint16_t port = 0;
  EXPECT_TRUE(split_host_port("localhost:8125", host, port));
  EXPECT_EQ(host, "localhost");
  EXPECT_EQ(port, 8125);
  EXPECT_TRUE(split_host_port("[::1]:9125", host, port));
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"localhost", ":8125", "h:0", "h:65536", "h:8125x", "::1:8125", "[]:1"}) {
    EXPECT_FALSE(split_host_port(bad, host, port)) << bad;
  }
}

// gostats' counters send what moved since the last flush, and nothing when nothing moved; gauges every time.
TEST(StatsdEmitter, CountersSendTheirIncreaseOnlyWhenTheyMoved) {
  std::string error;
  const auto tags = parse_tags("env:test", error);
  Emitter e(&*tags);
  e.counter("c", 5);
  e.gauge("g", 7);
  EXPECT_EQ(e.take(), "c.__env=test:5|c\ng.__env=test:7|g\n");
  e.counter("c", 5);
  EXPECT_EQ(e.take(), "");
  e.counter("c", 8);
  EXPECT_EQ(e.take(), "c.__env=test:3|c\n");
}

// A histogram's new observations per bucket, as the bucket's upper bound in milliseconds; +Inf's as the last bound.
TEST(StatsdEmitter, TimersSendEachBucketsNewSamplesAtItsBoundInMilliseconds) {
  Histogram h({0.001, 0.01});
  h.observe(0.0005);
  h.observe(0.0007);
  h.observe(0.005);
  Emitter e;
  e.timer("t", h);
  EXPECT_EQ(e.take(), "t:1|ms|@0.5\nt:10|ms\n");
  e.timer("t", h);
  EXPECT_EQ(e.take(), "");
  h.observe(3.0);
  e.timer("t", h);
  EXPECT_EQ(e.take(), "t:10|ms\n");
}

// ---- The sink itself, over a UDP socket on loopback (live).

int bound_udp(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

TEST(StatsdSink, FlushSendsTheSourcesLinesAsDatagrams) {
  std::uint16_t port = 0;
  const int fd = bound_udp(port);
  std::uint64_t hits = 4;
  Sink sink({.address = "127.0.0.1:" + std::to_string(port), .interval = std::chrono::hours(1)},
            [&](Emitter& e) { e.counter("ratelimit.service.rate_limit.d.k.total_hits", hits); });
  sink.flush();
  char buf[2048];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "ratelimit.service.rate_limit.d.k.total_hits:4|c\n");
  hits = 6;
  sink.stop();  // the last flush
  const ssize_t m = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(m, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(m)), "ratelimit.service.rate_limit.d.k.total_hits:2|c\n");
  EXPECT_EQ(sink.stats().sent.load(), 2u);
  EXPECT_EQ(sink.stats().dropped.load(), 0u);
  ::close(fd);
}

// Nobody listening: the port's refusal comes back (ICMP) and the next datagrams are counted lost; flush never
// blocks or throws.
TEST(StatsdSink, ADownDaemonLosesDatagramsAndTheyAreCounted) {
  std::uint16_t port = 0;
  ::close(bound_udp(port));  // a port nobody holds now
  std::uint64_t hits = 0;
  Sink sink({.address = "127.0.0.1:" + std::to_string(port), .interval = std::chrono::hours(1)},
            [&](Emitter& e) { e.counter("c", ++hits); });
  for (int i = 0; i < 50 && sink.stats().dropped.load() == 0; ++i) {
    sink.flush();
    ::usleep(10'000);
  }
  EXPECT_GT(sink.stats().dropped.load(), 0u);
}

TEST(StatsdSink, AnAddressThatIsNotHostPortIsRefused) {
  EXPECT_THROW(Sink({.address = "localhost"}, [](Emitter&) {}), std::invalid_argument);
}

}  // namespace
}  // namespace rk::metrics::statsd
