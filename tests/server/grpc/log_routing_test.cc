// gRPC's and protobuf's own log lines (server/grpc/log_routing.h) written by our logger: one JSON object a line,
// each of their source lines an event whose flood is held back and counted.
#include "server/grpc/log_routing.h"

#include <grpc/support/log.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "logging/log.h"

namespace rk::server::grpc {
namespace {

std::vector<nlohmann::json> lines_of(const std::string& out) {
  std::vector<nlohmann::json> lines;
  for (std::size_t at = 0, end; (end = out.find('\n', at)) != std::string::npos; at = end + 1) {
    lines.push_back(nlohmann::json::parse(out.substr(at, end - at)));  // throws unless one JSON object
  }
  return lines;
}

TEST(LogRouting, GrpcAndProtobufLinesAreJsonAndTheirFloodsAreCounted) {
  route_grpc_logs();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) gpr_log(GPR_ERROR, "Handshake failed %d", i);
  gpr_log(GPR_INFO, "below gRPC's verbosity: not written");
  // Bad UTF-8 in a string field, as any client can send: protobuf refuses it and logs why, each time.
  const std::string wire("\x0a\x02\xff\xfe", 4);  // domain (field 1, length 2): two bytes no UTF-8 begins with
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(envoy::service::ratelimit::v3::RateLimitRequest().ParseFromString(wire));
  logging::report_held_lines();
  const std::string out = ::testing::internal::GetCapturedStderr();

  std::vector<nlohmann::json> lines;
  ASSERT_NO_THROW(lines = lines_of(out)) << out;
  std::size_t grpc = 0, protobuf = 0, held_grpc = 0, held_protobuf = 0;
  for (const auto& line : lines) {
    if (line["msg"] == "log lines suppressed") {
      const std::string event = line["event"];
      const std::size_t count = std::stoul(line["suppressed"].get<std::string>());
      if (event.starts_with("grpc log_routing_test.cc:")) held_grpc += count;
      if (event.starts_with("protobuf ")) held_protobuf += count;
    } else if (line.value("at", "").starts_with("log_routing_test.cc:")) {
      EXPECT_TRUE(line["msg"].get<std::string>().starts_with("Handshake failed")) << line;
      ++grpc;
    } else if (line.value("source", "") == "protobuf") {
      EXPECT_NE(line["msg"].get<std::string>().find("UTF-8"), std::string::npos) << line;
      ++protobuf;
    }
  }
  EXPECT_EQ(grpc, logging::kRepeatLines) << out;
  EXPECT_EQ(held_grpc, 200 - logging::kRepeatLines);
  EXPECT_EQ(protobuf, logging::kRepeatLines) << out;
  EXPECT_EQ(held_protobuf, 50 - logging::kRepeatLines);
}

}  // namespace
}  // namespace rk::server::grpc
