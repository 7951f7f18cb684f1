// tracing/otlp_exporter.h: finished spans sent to an OpenTelemetry collector over OTLP, HTTP/protobuf (POST
// /v1/traces) or gRPC (TraceService/Export), in batches from a thread of its own.
//
//   auto exporter = std::make_shared<OtlpExporter>(OtlpOptions{.endpoint = "http://collector:4318/v1/traces",
//                                                              .protocol = OtlpProtocol::kHttpProtobuf,
//                                                              .service_name = "ratekeeper"});
//   Tracer tracer({.sample_rate = 0.01}, exporter);
//
// A collector that is down or slow never delays a decision: submit() only appends to a bounded queue under a lock
// no one holds while sending (the thread takes the whole queue in one swap); a span that finds the queue full is
// dropped, and so is a batch the collector refuses or does not take within `timeout`, with the rest of what the
// thread took that round (a collector that fails costs one `timeout` a round, not one a batch): all counted (stats()).
// Batches go out every `interval`, or at once when `max_batch` spans are waiting.
//
// Thread safety: submit() and stats() from any thread; the destructor sends what is queued (giving up at the first
// batch that fails, as every round does) and joins the thread: a collector that does not answer delays it by at most
// two `timeout`s, the round in flight's and the last.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tracing/tracer.h"

namespace rk::tracing {

enum class OtlpProtocol { kHttpProtobuf, kGrpc };

struct OtlpOptions {
  // kHttpProtobuf: the full URL spans are posted to ("http://host:4318/v1/traces"); kGrpc: "host:port", or
  // "http://host:port" (plaintext), or "https://host:port" (TLS, the system's CAs).
  std::string endpoint;
  OtlpProtocol protocol = OtlpProtocol::kHttpProtobuf;
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every export (an API key, say)
  std::string service_name = "ratekeeper";
  std::string service_version;
  std::size_t max_queue = 2048;
  std::size_t max_batch = 512;
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{5000};
};

struct OtlpStats {
  std::uint64_t exported = 0;  // spans the collector took
  std::uint64_t dropped = 0;   // spans lost: queue full, or their batch failed
  std::uint64_t failed_exports = 0;
};

// The spans as one ExportTraceServiceRequest, serialized: one resource (service.name, service.version), one scope.
std::string encode_export_request(const std::vector<Span>& spans, const OtlpOptions& options);

// An endpoint's problem ("--otlp-endpoint: ..."-ready text), or empty when `options` can be used.
std::string check_otlp_options(const OtlpOptions& options);

class OtlpExporter : public SpanSink {
 public:
  explicit OtlpExporter(OtlpOptions options);  // throws std::invalid_argument for what check_otlp_options refuses
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  void submit(Span span) override;
  OtlpStats stats() const;

  class Transport;  // HTTP or gRPC

 private:
  void run();
  bool send(std::vector<Span>& batch);  // false: failed, counted and logged

  OtlpOptions options_;
  std::unique_ptr<Transport> transport_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Span> queue_;  // under mu_
  bool stopping_ = false;    // under mu_
  std::atomic<std::uint64_t> exported_{0}, dropped_{0}, failed_{0};
  std::thread thread_;
};

}  // namespace rk::tracing
