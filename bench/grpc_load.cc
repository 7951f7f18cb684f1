// bench/grpc_load.cc: a gRPC load generator for Envoy's rate-limit API on libgrpc++'s client: many calls in
// flight on one completion queue, 1,000 clients in turn; prints decisions/s and latency percentiles.
//
// Kept beside bench/grpc_h2_load.cc (the figure of record) to show what libgrpc's own client costs: about as much
// CPU per call as the server, so on a shared 2-core machine it measures the pair. Envoy does not use it for rate
// limiting (its "Envoy gRPC" client runs over its own HTTP/2 codec).
//
//   rk_grpc_load 127.0.0.1:8081 [--seconds 5] [--inflight 64] [--channels 2] [--domain bench] [--key client]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace pb = envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

struct Call {
  grpc::ClientContext context;
  pb::RateLimitResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::RateLimitResponse>> reader;
  Clock::time_point started;
};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rk_grpc_load ADDR [--seconds N] [--inflight N] [--domain D] [--key K]\n");
    return 2;
  }
  std::string address = argv[1], domain = "bench", key = "client";
  int seconds = 5, inflight = 64, channels = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--inflight")) inflight = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--domain")) domain = argv[i + 1];
    else if (!std::strcmp(argv[i], "--key")) key = argv[i + 1];
    else if (!std::strcmp(argv[i], "--channels")) channels = std::max(1, std::atoi(argv[i + 1]));
  }
  // Several connections, as Envoy opens one per worker thread: one HTTP/2 connection is processed serially.
  std::vector<std::unique_ptr<pb::RateLimitService::Stub>> stubs;
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("rk.channel", i);  // distinct arguments: distinct connections
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "rk_grpc_load: cannot connect to %s\n", address.c_str());
      return 1;
    }
    stubs.push_back(pb::RateLimitService::NewStub(channel));
  }
  std::vector<pb::RateLimitRequest> requests(1000);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_domain(domain);
    auto* e = requests[i].add_descriptors()->add_entries();
    e->set_key(key);
    e->set_value("client-" + std::to_string(i));
  }
  grpc::CompletionQueue cq;
  std::size_t next = 0;
  auto start_call = [&] {
    auto* c = new Call;
    c->started = Clock::now();
    auto& stub = stubs[next % stubs.size()];
    c->reader = stub->PrepareAsyncShouldRateLimit(&c->context, requests[next++ % requests.size()], &cq);
    c->reader->StartCall();
    c->reader->Finish(&c->response, &c->status, c);
  };
  const auto begin = Clock::now();
  const auto end = begin + std::chrono::seconds(seconds);
  for (int i = 0; i < inflight; ++i) start_call();
  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(seconds) * 200'000);
  std::size_t failed = 0, over = 0, outstanding = static_cast<std::size_t>(inflight);
  void* tag;
  bool ok;
  while (outstanding > 0 && cq.Next(&tag, &ok)) {
    auto* c = static_cast<Call*>(tag);
    --outstanding;
    const auto now = Clock::now();
    if (!ok || !c->status.ok()) ++failed;
    else {
      latencies.push_back(std::chrono::duration<double, std::milli>(now - c->started).count());
      over += c->response.overall_code() == pb::RateLimitResponse::OVER_LIMIT;
    }
    delete c;
    if (now < end) {
      start_call();
      ++outstanding;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies.empty() ? 0.0 : latencies[static_cast<std::size_t>(p * static_cast<double>(latencies.size() - 1))];
  };
  std::printf("decisions/s %.0f p50_ms %.3f p99_ms %.3f failed %zu over_limit %zu\n",
              static_cast<double>(latencies.size()) / elapsed, pct(0.50), pct(0.99), failed, over);
  return failed == 0 ? 0 : 1;
}
