// tracing/otlp_exporter.cc: spans encoded as OTLP protobuf and sent over HTTP or gRPC from one thread (see
// otlp_exporter.h).
#include "tracing/otlp_exporter.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include <grpcpp/grpcpp.h>

#include "logging/log.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"

namespace rk::tracing {

namespace otlp = opentelemetry::proto;
using Clock = std::chrono::steady_clock;

namespace {

void set_value(otlp::common::v1::AnyValue& out, const AttributeValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    out.set_string_value(*s);
  } else if (const auto* i = std::get_if<std::int64_t>(&v)) {
    out.set_int_value(*i);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    out.set_bool_value(*b);
  } else {
    auto* array = out.mutable_array_value();
    for (const std::string& item : std::get<std::vector<std::string>>(v)) {
      array->add_values()->set_string_value(item);
    }
  }
}

void add_attribute(google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>& list, const std::string& key,
                   const AttributeValue& value) {
  auto* kv = list.Add();
  kv->set_key(key);
  set_value(*kv->mutable_value(), value);
}

// "http://host:port/path" split; false for anything else.
struct HttpUrl {
  std::string host, port, path;
};
bool parse_http_url(std::string_view url, HttpUrl& out) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return false;
  url.remove_prefix(kScheme.size());
  const std::size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  out.path = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  std::string_view host = authority, port = "80";
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) return false;
      port = after.substr(1);
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  if (host.empty() || ec != std::errc{} || end != port.data() + port.size() || n == 0 || n > 65535) return false;
  for (const char c : out.path) {
    if (c <= 0x20 || c >= 0x7f) return false;  // nothing that could end the request line
  }
  out.host = std::string(host);
  out.port = std::string(port);
  return true;
}

bool header_safe(std::string_view s) {
  for (const char c : s) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

}  // namespace

std::string encode_export_request(const std::vector<Span>& spans, const OtlpOptions& options) {
  otlp::collector::trace::v1::ExportTraceServiceRequest request;
  auto* resource_spans = request.add_resource_spans();
  auto* resource = resource_spans->mutable_resource();
  add_attribute(*resource->mutable_attributes(), "service.name", options.service_name);
  if (!options.service_version.empty()) {
    add_attribute(*resource->mutable_attributes(), "service.version", options.service_version);
  }
  auto* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name("ratekeeper");
  for (const Span& s : spans) {
    auto* out = scope_spans->add_spans();
    out->set_trace_id(s.trace_id.data(), s.trace_id.size());
    out->set_span_id(s.span_id.data(), s.span_id.size());
    if (s.parent_span_id) out->set_parent_span_id(s.parent_span_id->data(), s.parent_span_id->size());
    if (!s.trace_state.empty()) out->set_trace_state(s.trace_state);
    out->set_flags(1);  // sampled: only sampled spans are recorded
    out->set_name(s.name);
    out->set_kind(otlp::trace::v1::Span::SPAN_KIND_SERVER);
    out->set_start_time_unix_nano(s.start_unix_ns);
    out->set_end_time_unix_nano(s.end_unix_ns);
    for (const auto& [key, value] : s.attributes) add_attribute(*out->mutable_attributes(), key, value);
    auto* status = out->mutable_status();
    status->set_code(s.error ? otlp::trace::v1::Status::STATUS_CODE_ERROR : otlp::trace::v1::Status::STATUS_CODE_OK);
    if (!s.status_message.empty()) status->set_message(s.status_message);
  }
  return request.SerializeAsString();
}

std::string check_otlp_options(const OtlpOptions& o) {
  if (o.endpoint.empty()) return "the endpoint is empty";
  for (const auto& [k, v] : o.headers) {
    if (k.empty() || !header_safe(k) || !header_safe(v) || k.find(':') != std::string::npos) {
      return "header '" + k + "' cannot be sent";
    }
  }
  if (o.protocol == OtlpProtocol::kHttpProtobuf) {
    if (o.endpoint.starts_with("https://")) {
      return "'" + o.endpoint + "': https is not supported with http/protobuf (use grpc with an https:// URL)";
    }
    HttpUrl url;
    if (!parse_http_url(o.endpoint, url)) return "'" + o.endpoint + "' is not an http://host:port/path URL";
  } else {
    std::string_view target = o.endpoint;
    if (target.starts_with("http://")) target.remove_prefix(7);
    else if (target.starts_with("https://")) target.remove_prefix(8);
    if (target.empty() || target.find('/') != std::string_view::npos || target.find(':') == std::string_view::npos) {
      return "'" + o.endpoint + "' is not host:port (or http:// or https:// and host:port)";
    }
  }
  if (o.max_queue == 0 || o.max_batch == 0) return "the queue and batch sizes must be at least 1";
  return {};
}

class OtlpExporter::Transport {
 public:
  virtual ~Transport() = default;
  // True when the collector took the batch; `error` says why not.
  virtual bool send(const std::string& body, std::string& error) = 0;
};

namespace {

// One connection a batch (a batch a second at most), closed after its answer.
class HttpTransport : public OtlpExporter::Transport {
 public:
  explicit HttpTransport(const OtlpOptions& o) : timeout_(o.timeout) {
    parse_http_url(o.endpoint, url_);
    head_ = "POST " + url_.path + " HTTP/1.1\r\nHost: " + url_.host + ":" + url_.port +
            "\r\nContent-Type: application/x-protobuf\r\nConnection: close\r\n";
    for (const auto& [k, v] : o.headers) head_ += k + ": " + v + "\r\n";
  }

  bool send(const std::string& body, std::string& error) override {
    const auto deadline = Clock::now() + timeout_;
    const int fd = connect_by(deadline, error);
    if (fd < 0) return false;
    const std::string request = head_ + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    const bool ok = write_all(fd, request, deadline, error) && read_status(fd, deadline, error);
    ::close(fd);
    return ok;
  }

 private:
  static int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
  }

  // Waits for `events` on fd until the deadline.
  static bool wait(int fd, short events, Clock::time_point deadline) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    for (;;) {
      const int r = ::poll(&p, 1, remaining_ms(deadline));
      if (r > 0) return true;
      if (r == 0 || errno != EINTR) return false;
    }
  }

  int connect_by(Clock::time_point deadline, std::string& error) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(url_.host.c_str(), url_.port.c_str(), &hints, &found); rc != 0) {
      error = "cannot resolve " + url_.host + ": " + gai_strerror(rc);
      return -1;
    }
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int err = 0;
      socklen_t len = sizeof err;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
      if (errno != EINPROGRESS) err = errno;
      else if (!wait(fd, POLLOUT, deadline)) err = ETIMEDOUT;
      else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == 0) break;
      error = "cannot connect to " + url_.host + ":" + url_.port + ": " + std::strerror(err);
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(found);
    return fd;
  }

  static bool write_all(int fd, std::string_view data, Clock::time_point deadline, std::string& error) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!wait(fd, POLLOUT, deadline)) return error = "timed out sending", false;
      } else {
        return error = std::string("send: ") + std::strerror(errno), false;
      }
    }
    return true;
  }

  // The status line's code: 2xx is success.
  static bool read_status(int fd, Clock::time_point deadline, std::string& error) {
    std::string head;
    char buf[512];
    while (head.find("\r\n") == std::string::npos && head.size() < 4096) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        head.append(buf, static_cast<std::size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!wait(fd, POLLIN, deadline)) return error = "timed out waiting for the answer", false;
      } else {
        return error = "the collector closed the connection", false;
      }
    }
    if (head.size() < 12 || !head.starts_with("HTTP/1.")) return error = "not an HTTP answer", false;
    if (head[9] != '2') return error = "HTTP " + head.substr(9, 3), false;
    return true;
  }

  HttpUrl url_;
  std::string head_;
  std::chrono::milliseconds timeout_;
};

class GrpcTransport : public OtlpExporter::Transport {
 public:
  explicit GrpcTransport(const OtlpOptions& o) : options_(o) {
    std::string_view target = o.endpoint;
    const bool tls = target.starts_with("https://");
    if (target.starts_with("http://")) target.remove_prefix(7);
    if (tls) target.remove_prefix(8);
    auto credentials = tls ? grpc::SslCredentials(grpc::SslCredentialsOptions()) : grpc::InsecureChannelCredentials();
    stub_ = otlp::collector::trace::v1::TraceService::NewStub(grpc::CreateChannel(std::string(target), credentials));
  }

  bool send(const std::string& body, std::string& error) override {
    otlp::collector::trace::v1::ExportTraceServiceRequest request;
    request.ParseFromString(body);
    otlp::collector::trace::v1::ExportTraceServiceResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    for (const auto& [k, v] : options_.headers) {
      std::string key = k;
      for (char& c : key) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      context.AddMetadata(key, v);
    }
    const grpc::Status status = stub_->Export(&context, request, &response);
    if (!status.ok()) error = "gRPC " + std::to_string(status.error_code()) + ": " + status.error_message();
    return status.ok();
  }

 private:
  OtlpOptions options_;
  std::unique_ptr<otlp::collector::trace::v1::TraceService::Stub> stub_;
};

}  // namespace

OtlpExporter::OtlpExporter(OtlpOptions options) : options_(std::move(options)) {
  if (std::string problem = check_otlp_options(options_); !problem.empty()) throw std::invalid_argument(problem);
  if (options_.protocol == OtlpProtocol::kHttpProtobuf) {
    transport_ = std::make_unique<HttpTransport>(options_);
  } else {
    transport_ = std::make_unique<GrpcTransport>(options_);
  }
  queue_.reserve(options_.max_queue);
  thread_ = std::thread([this] { run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void OtlpExporter::submit(Span span) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= options_.max_queue || stopping_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(span));
    wake = queue_.size() == options_.max_batch;
  }
  if (wake) wake_.notify_one();
}

OtlpStats OtlpExporter::stats() const {
  return {.exported = exported_.load(), .dropped = dropped_.load(), .failed_exports = failed_.load()};
}

void OtlpExporter::run() {
  std::vector<Span> taken;
  taken.reserve(options_.max_queue);
  for (;;) {
    bool last = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, options_.interval, [&] { return stopping_ || queue_.size() >= options_.max_batch; });
      taken.swap(queue_);  // the queue gets the (empty, reserved) vector of the last round
      last = stopping_;
    }
    for (std::size_t at = 0; at < taken.size(); at += options_.max_batch) {
      const std::size_t end = std::min(taken.size(), at + options_.max_batch);
      std::vector<Span> batch(std::make_move_iterator(taken.begin() + static_cast<std::ptrdiff_t>(at)),
                              std::make_move_iterator(taken.begin() + static_cast<std::ptrdiff_t>(end)));
      if (!send(batch)) {  // the collector fails: the rest of this round is dropped, not one timeout per batch
        dropped_.fetch_add(taken.size() - end, std::memory_order_relaxed);
        break;
      }
    }
    taken.clear();
    if (last) return;
  }
}

bool OtlpExporter::send(std::vector<Span>& batch) {
  std::string error;
  if (transport_->send(encode_export_request(batch, options_), error)) {
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
    return true;
  }
  dropped_.fetch_add(batch.size(), std::memory_order_relaxed);
  failed_.fetch_add(1, std::memory_order_relaxed);
  logging::log(logging::Level::kError, "trace export failed",
               {{"endpoint", options_.endpoint}, {"spans", std::to_string(batch.size())}, {"error", error}});
  return false;
}

}  // namespace rk::tracing
