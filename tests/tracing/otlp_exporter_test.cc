// Spans encoded as OTLP (decoded back by the same .proto files a collector uses), and an exporter whose collector
// is down or does not answer: submit() never waits, the spans are dropped and counted.
#include "tracing/otlp_exporter.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace rk::tracing {
namespace {

namespace otlp = opentelemetry::proto;

Span span(std::uint8_t n) {
  Span s;
  s.trace_id.fill(n);
  s.span_id.fill(static_cast<std::uint8_t>(n + 1));
  s.name = "ratekeeper.decide";
  s.start_unix_ns = 1000;
  s.end_unix_ns = 2500;
  return s;
}

TEST(OtlpEncode, EveryFieldDecodesAsACollectorReadsIt) {
  Span s = span(7);
  s.parent_span_id = SpanId{9, 9, 9, 9, 9, 9, 9, 9};
  s.trace_state = "congo=t61rcWkgMzE";
  s.attributes = {{"ratelimit.domain", std::string("edge")},
                  {"ratelimit.retry_after_ms", std::int64_t{1500}},
                  {"ratelimit.shadowed", true},
                  {"ratelimit.rules", std::vector<std::string>{"per_ip", ""}}};
  s.error = true;
  s.status_message = "the store did not answer";
  otlp::collector::trace::v1::ExportTraceServiceRequest request;
  ASSERT_TRUE(request.ParseFromString(encode_export_request({s, span(8)}, {.service_name = "edge-limits"})));
  ASSERT_EQ(request.resource_spans_size(), 1);
  const auto& rs = request.resource_spans(0);
  ASSERT_EQ(rs.resource().attributes_size(), 1);
  EXPECT_EQ(rs.resource().attributes(0).key(), "service.name");
  EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "edge-limits");
  ASSERT_EQ(rs.scope_spans_size(), 1);
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "ratekeeper");
  ASSERT_EQ(rs.scope_spans(0).spans_size(), 2);
  const auto& out = rs.scope_spans(0).spans(0);
  EXPECT_EQ(out.trace_id(), std::string(16, '\x07'));
  EXPECT_EQ(out.span_id(), std::string(8, '\x08'));
  EXPECT_EQ(out.parent_span_id(), std::string(8, '\x09'));
  EXPECT_EQ(out.trace_state(), "congo=t61rcWkgMzE");
  EXPECT_EQ(out.name(), "ratekeeper.decide");
  EXPECT_EQ(out.kind(), otlp::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(out.start_time_unix_nano(), 1000u);
  EXPECT_EQ(out.end_time_unix_nano(), 2500u);
  EXPECT_EQ(out.flags() & 0xff, 1u);
  ASSERT_EQ(out.attributes_size(), 4);
  EXPECT_EQ(out.attributes(0).value().string_value(), "edge");
  EXPECT_EQ(out.attributes(1).value().int_value(), 1500);
  EXPECT_TRUE(out.attributes(2).value().bool_value());
  ASSERT_EQ(out.attributes(3).value().array_value().values_size(), 2);
  EXPECT_EQ(out.attributes(3).value().array_value().values(0).string_value(), "per_ip");
  EXPECT_EQ(out.status().code(), otlp::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(out.status().message(), "the store did not answer");
  const auto& root = rs.scope_spans(0).spans(1);
  EXPECT_TRUE(root.parent_span_id().empty());
  EXPECT_EQ(root.status().code(), otlp::trace::v1::Status::STATUS_CODE_OK);
}

TEST(OtlpEncode, EndpointsAndHeadersAreChecked) {
  EXPECT_EQ(check_otlp_options({.endpoint = "http://127.0.0.1:4318/v1/traces"}), "");
  EXPECT_EQ(check_otlp_options({.endpoint = "http://[::1]:4318/v1/traces"}), "");
  EXPECT_EQ(check_otlp_options({.endpoint = "collector:4317", .protocol = OtlpProtocol::kGrpc}), "");
  EXPECT_NE(check_otlp_options({.endpoint = "https://c:4318/v1/traces"}).find("https is not supported"),
            std::string::npos);
  EXPECT_NE(check_otlp_options({.endpoint = "http://c:99999/v1/traces"}), "");
  EXPECT_NE(check_otlp_options({.endpoint = "c:4318"}), "");
  EXPECT_NE(check_otlp_options({.endpoint = "collector", .protocol = OtlpProtocol::kGrpc}), "");
  EXPECT_NE(check_otlp_options({.endpoint = "http://c:1/x", .headers = {{"a", "b\r\nc: d"}}}), "");
  EXPECT_THROW(OtlpExporter({.endpoint = "ftp://c:1"}), std::invalid_argument);
}

// A port nothing listens on (bound, then closed).
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A listener that never accepts or reads: the kernel completes connections into its backlog, and then nothing.
struct Silent {
  Silent() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Silent() { ::close(fd); }
  int fd;
  int port;
};

// Submitting `n` spans: how long the slowest single submit() took.
std::chrono::nanoseconds submit_many(OtlpExporter& e, int n) {
  std::chrono::nanoseconds slowest{0};
  for (int i = 0; i < n; ++i) {
    const auto t = std::chrono::steady_clock::now();
    e.submit(span(static_cast<std::uint8_t>(i)));
    slowest = std::max(slowest, std::chrono::steady_clock::now() - t);
  }
  return slowest;
}

void wait_for(const std::function<bool()>& done, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!done() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(OtlpExporter, ACollectorThatIsDownCostsSubmitNothingAndItsSpansAreCounted) {
  for (const OtlpProtocol protocol : {OtlpProtocol::kHttpProtobuf, OtlpProtocol::kGrpc}) {
    const std::string port = std::to_string(closed_port());
    OtlpOptions o{
        .endpoint = protocol == OtlpProtocol::kGrpc ? "127.0.0.1:" + port : "http://127.0.0.1:" + port + "/v1/traces",
        .protocol = protocol,
        .max_queue = 100,
        .max_batch = 50,
        .interval = std::chrono::milliseconds(20),
        .timeout = std::chrono::milliseconds(1000)};
    OtlpExporter e(o);
    const auto slowest = submit_many(e, 1000);
    EXPECT_LT(slowest, o.timeout / 2);  // never a wait for the collector (half of it: a busy machine's pauses)
    wait_for([&] { return e.stats().failed_exports > 0; }, 20 * o.timeout);
    const OtlpStats s = e.stats();
    EXPECT_GT(s.failed_exports, 0u);
    EXPECT_GE(s.dropped, 900u);  // past the queue's 100, and the batches that failed
    EXPECT_EQ(s.exported, 0u);
  }
}

TEST(OtlpExporter, ACollectorThatDoesNotAnswerCostsSubmitNothing) {
  Silent silent;
  OtlpOptions o{.endpoint = "http://127.0.0.1:" + std::to_string(silent.port) + "/v1/traces",
                .max_queue = 64,
                .max_batch = 16,
                .interval = std::chrono::milliseconds(10),
                .timeout = std::chrono::milliseconds(1000)};
  const auto began = std::chrono::steady_clock::now();
  {
    OtlpExporter e(o);
    // While the thread waits on the silent collector, the queue fills and what is past it is dropped at once.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto slowest = submit_many(e, 2000);
    EXPECT_LT(slowest, o.timeout / 2);
    wait_for([&] { return e.stats().failed_exports > 0; }, 20 * o.timeout);
    EXPECT_GT(e.stats().failed_exports, 0u);
    EXPECT_GT(e.stats().dropped, 1000u);
  }
  // Each round, stopping's too, gives up at its first batch that fails: one timeout a round, not one a batch queued
  // (4 batches a full queue here).
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10 * o.timeout);
}

}  // namespace
}  // namespace rk::tracing
