#include "server/grpc/rls_server.h"

#include <absl/synchronization/mutex.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <chrono>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "tracing/context.h"
#include "service/response_headers.h"
#include "server/connections/limits.h"
#include "server/grpc/acceptor.h"
#include "server/grpc/health_service.h"
#include "server/grpc/log_routing.h"
#include "server/grpc/tls_credentials.h"
#include "server/grpc/unary_call.h"

namespace rk::server::grpc {

namespace {

namespace pb = envoy::service::ratelimit::v3;
using Descriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

std::optional<rules::Unit> unit_from_proto(envoy::type::v3::RateLimitUnit u) {
  switch (u) {
    case envoy::type::v3::SECOND: return rules::Unit::kSecond;
    case envoy::type::v3::MINUTE: return rules::Unit::kMinute;
    case envoy::type::v3::HOUR: return rules::Unit::kHour;
    case envoy::type::v3::DAY: return rules::Unit::kDay;
    case envoy::type::v3::MONTH: return rules::Unit::kMonth;
    case envoy::type::v3::YEAR: return rules::Unit::kYear;
    default: return std::nullopt;
  }
}

pb::RateLimitResponse::RateLimit::Unit unit_to_proto(std::optional<rules::Unit> u) {
  using R = pb::RateLimitResponse::RateLimit;
  if (!u) return R::UNKNOWN;
  switch (*u) {
    case rules::Unit::kSecond: return R::SECOND;
    case rules::Unit::kMinute: return R::MINUTE;
    case rules::Unit::kHour: return R::HOUR;
    case rules::Unit::kDay: return R::DAY;
    case rules::Unit::kWeek: return R::WEEK;
    case rules::Unit::kMonth: return R::MONTH;
    case rules::Unit::kYear: return R::YEAR;
  }
  return R::UNKNOWN;
}

// The wire request as the service's; an override with an unknown unit is a bad request.
std::optional<service::RequestError> from_proto(const pb::RateLimitRequest& in, service::CheckRequest& out) {
  out.domain = in.domain();
  out.hits_addend = in.hits_addend();
  out.descriptors.reserve(static_cast<std::size_t>(in.descriptors_size()));
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const Descriptor& d = in.descriptors(i);
    service::CheckDescriptor desc;
    desc.entries.reserve(static_cast<std::size_t>(d.entries_size()));
    for (const auto& e : d.entries()) desc.entries.emplace_back(e.key(), e.value());
    if (d.has_hits_addend()) desc.hits_addend = d.hits_addend().value();
    if (d.has_limit()) {
      const auto unit = unit_from_proto(d.limit().unit());
      if (!unit) {
        return service::RequestError{"descriptors[" + std::to_string(i) + "].limit.unit",
                                     "must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR"};
      }
      desc.limit = service::LimitOverride{d.limit().requests_per_unit(), *unit};
    }
    out.descriptors.push_back(std::move(desc));
  }
  return std::nullopt;
}

void to_proto(const service::CheckResponse& in, bool headers, pb::RateLimitResponse& out) {
  out.set_overall_code(static_cast<pb::RateLimitResponse::Code>(in.overall));
  for (const service::DescriptorStatus& st : in.statuses) {
    auto* s = out.add_statuses();
    s->set_code(static_cast<pb::RateLimitResponse::Code>(st.code));
    s->set_limit_remaining(st.limit_remaining);
    if (st.has_limit) {
      auto* limit = s->mutable_current_limit();
      limit->set_requests_per_unit(st.requests_per_unit);
      limit->set_unit(unit_to_proto(st.unit));
      // Envoy copies the name into headers: upstream's is the rule's own `name:`, empty for unnamed rules and for a
      // request's own limit (DescriptorStatus::name, a label for our logs and metrics, falls back to the path).
      if (st.rule) limit->set_name(st.rule->limit->name);
      auto* d = s->mutable_duration_until_reset();
      const auto whole = std::chrono::duration_cast<std::chrono::seconds>(st.duration_until_reset);
      d->set_seconds(whole.count());
      d->set_nanos(static_cast<std::int32_t>((st.duration_until_reset - whole).count()));
    }
  }
  if (headers) {
    // The library's one formatter (src/http_fields/rate_limit_headers.h): the bytes forward-auth and nginx send.
    for (auto& [k, v] : service::rate_limit_headers(in)) {
      auto* h = out.add_response_headers_to_add();
      h->set_key(k);
      h->set_value(v);
    }
  }
}

const char* unit_text(envoy::type::v3::RateLimitUnit u) { return envoy::type::v3::RateLimitUnit_Name(u).c_str(); }

// Merges `from` into `into`: a key `into` has already keeps its value, unless both are structs, merged in turn
// (upstream's mergeMetadata: the first descriptor to pass wins).
void merge(google::protobuf::Struct& into, const google::protobuf::Struct& from) {
  for (const auto& [key, value] : from.fields()) {
    auto it = into.mutable_fields()->find(key);
    if (it == into.mutable_fields()->end()) {
      (*into.mutable_fields())[key] = value;
    } else if (it->second.has_struct_value() && value.has_struct_value()) {
      merge(*it->second.mutable_struct_value(), value.struct_value());
    }
  }
}

// RateLimitResponse.dynamic_metadata as upstream fills it (GrpcOptions::response_metadata).
void metadata_to_proto(const pb::RateLimitRequest& request, const service::CheckResponse& r,
                       google::protobuf::Struct& out) {
  auto& fields = *out.mutable_fields();
  fields["domain"].set_string_value(request.domain());
  auto* list = fields["descriptors"].mutable_list_value();
  for (const Descriptor& d : request.descriptors()) {
    auto& f = *list->add_values()->mutable_struct_value()->mutable_fields();
    auto* entries = f["entries"].mutable_list_value();
    for (const auto& e : d.entries()) entries->add_values()->set_string_value(e.key() + "=" + e.value());
    if (d.has_limit()) {
      // Go's text form of the override (upstream writes descriptor.Limit.String()).
      f["limit"].set_string_value("requests_per_unit:" + std::to_string(d.limit().requests_per_unit()) +
                                  " unit:" + unit_text(d.limit().unit()));
    }
    if (d.has_hits_addend()) f["hitsAddend"].set_number_value(static_cast<double>(d.hits_addend().value()));
  }
  if (request.hits_addend() != 0) fields["hitsAddend"].set_number_value(static_cast<double>(request.hits_addend()));
  google::protobuf::Struct passed;
  for (const service::DescriptorStatus& st : r.statuses) {
    if (st.unlimited || st.code == service::Code::kOverLimit || !st.rule || st.rule->metadata.empty()) continue;
    google::protobuf::Struct m;
    if (google::protobuf::util::JsonStringToMessage(st.rule->metadata, &m).ok()) merge(passed, m);
  }
  if (passed.fields_size() > 0) *fields["metadata"].mutable_struct_value() = std::move(passed);
}

// The caller's trace context from the call's metadata (lower-case keys); a key given twice is malformed.
tracing::Parent trace_parent(const ::grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  return tracing::read_parent([&metadata](std::string_view name) -> std::optional<std::string_view> {
    const auto [first, last] = metadata.equal_range(::grpc::string_ref(name.data(), name.size()));
    if (first == last) return std::nullopt;
    if (std::next(first) != last) return std::string_view();
    return std::string_view(first->second.data(), first->second.size());
  });
}

}  // namespace

// The async API with one completion queue per thread: cheaper per call than the callback API's thread hops. The
// health service runs on the same queues (see health_service.h for why not gRPC's built-in one).
struct GrpcServer::Impl {
  Impl(service::Service& s, GrpcOptions o, GrpcHooks h) : service(s), options(std::move(o)), hooks(std::move(h)) {}

  // ShouldRateLimit, as UnaryCall answers it: at once for in-process domains; from the remote store's thread
  // otherwise.
  using Call = UnaryCall<pb::RateLimitRequest, pb::RateLimitResponse, Impl,
                         &pb::RateLimitService::AsyncService::RequestShouldRateLimit>;

  template <class Finish>
  void answer(const ::grpc::ServerContext& context, const pb::RateLimitRequest& request,
              pb::RateLimitResponse& response, Finish finish) {
    const auto start = std::chrono::steady_clock::now();
    service::CheckRequest check;
    if (std::optional<service::RequestError> error = from_proto(request, check)) return finish(invalid(*error));
    check.protocol = "grpc";
    if (service.wants_trace_context()) check.trace = trace_parent(context);
    std::string domain = check.domain;
    service.check_async(std::move(check), [this, start, &request, &response, finish,
                                           domain = std::move(domain)](service::CheckResult result) mutable {
      if (auto* e = std::get_if<service::RequestError>(&result)) return finish(invalid(*e));
      const auto& r = std::get<service::CheckResponse>(result);
      to_proto(r, options.response_headers, response);
      if (options.response_metadata) metadata_to_proto(request, r, *response.mutable_dynamic_metadata());
      if (hooks.decided) hooks.decided(domain, r, std::chrono::steady_clock::now() - start);
      if (hooks.answered) hooks.answered("OK");
      finish(::grpc::Status::OK);
    });
  }

  ::grpc::Status invalid(const service::RequestError& error) const {
    if (hooks.answered) hooks.answered("INVALID_ARGUMENT");
    return ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT,
                          (error.field.empty() ? "" : error.field + ": ") + error.message);
  }

  service::Service& service;
  GrpcOptions options;
  GrpcHooks hooks;
  pb::RateLimitService::AsyncService rls;
  HealthService health{{"envoy.service.ratelimit.v3.RateLimitService"}, options.max_watch_streams};
  std::unique_ptr<TlsCredentials> tls;     // with TLS; outlives the server, whose handshakes read its directory
  std::unique_ptr<::grpc::Server> server;  // declared after the services it serves: destroyed before them
  std::unique_ptr<::grpc::experimental::ExternalConnectionAcceptor> external;  // how connections reach the server
  std::unique_ptr<detail::Acceptor> acceptor;  // declared after: stopped and destroyed first
  std::vector<std::unique_ptr<::grpc::ServerCompletionQueue>> queues;
  std::vector<std::thread> threads;
  int port = 0;
  std::mutex mu;
  bool stopped = false;
};

GrpcServer::GrpcServer(service::Service& service, GrpcOptions options, GrpcHooks hooks) {
  for (const auto& [name, value] : {std::pair{"max_message_bytes", options.max_message_bytes},
                                    std::pair{"max_streams_per_connection", options.max_streams_per_connection},
                                    std::pair{"max_watch_streams", options.max_watch_streams}}) {
    if (value < 1) {
      throw std::invalid_argument(std::string("GrpcOptions::") + name + " is " + std::to_string(value) +
                                  "; it must be at least 1");
    }
  }
  if (options.max_connections < 1) {
    throw std::invalid_argument("GrpcOptions::max_connections is 0; it must be at least 1");
  }
  try {
    (void)server::connections::Networks(options.per_ip_exempt);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("GrpcOptions::per_ip_exempt: ") + e.what());
  }
  impl_ = std::make_unique<Impl>(service, std::move(options), std::move(hooks));
  route_grpc_logs();
}

GrpcServer::~GrpcServer() { stop(); }

namespace {

server::tls::TlsFiles tls_files(const GrpcOptions& o) {
  return {.cert = o.tls_cert, .key = o.tls_key, .client_ca = o.tls_client_ca};
}

// Plaintext, or TLS from pairs read and checked as the HTTPS listeners' are (tls_credentials.h).
std::shared_ptr<::grpc::ServerCredentials> credentials(GrpcServer::Impl& impl) {
  const GrpcOptions& o = impl.options;
  if (o.tls_cert.empty()) return ::grpc::InsecureServerCredentials();
  impl.tls = std::make_unique<TlsCredentials>(server::tls::read_tls_files(tls_files(o)), o.tls_refresh_seconds,
                                              o.tls_client_san);
  return impl.tls->credentials();
}

}  // namespace

void GrpcServer::start() {
  // Debian builds abseil without NDEBUG, so every absl::Mutex inside gRPC also maintains a lock-order graph for
  // deadlock detection (absl's GraphCycles, a few % of the server's CPU under load; upstream release builds skip
  // it). Process-wide; ratekeeper's own locks are std::mutex.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ::grpc::EnableDefaultHealthCheckService(false);  // ours instead, on our queues
  const GrpcOptions& o = impl_->options;
  // Our own accept() (acceptor.h) hands gRPC the connections it admits; it listens first, so that a port in use
  // throws before anything starts.
  impl_->acceptor = std::make_unique<detail::Acceptor>(
      detail::AcceptorOptions{.address = o.address,
                              .limits = {.max = o.max_connections,
                                         .max_per_ip = o.max_connections_per_ip,
                                         .per_ip_exempt = o.per_ip_exempt},
                              .busy_idle_timeout = std::chrono::milliseconds(o.busy_idle_timeout_ms),
                              .fd_ceiling = o.fd_ceiling},
      detail::AcceptorEvents{.connection = impl_->hooks.connection, .refused = impl_->hooks.refused});
  impl_->port = impl_->acceptor->port();
  ::grpc::ServerBuilder builder;
  impl_->external = builder.experimental().AddExternalConnectionAcceptor(
      ::grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials(*impl_));
  builder.RegisterService(&impl_->rls);
  builder.RegisterService(impl_->health.service());
  builder.SetMaxReceiveMessageSize(impl_->options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, impl_->options.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, impl_->options.handshake_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, o.idle_timeout_ms);
  if (o.max_connection_age_ms > 0) builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, o.max_connection_age_ms);
  if (o.max_connection_age_grace_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, o.max_connection_age_grace_ms);
  }
  const int threads = std::max(1, impl_->options.threads);
  for (int i = 0; i < threads; ++i) impl_->queues.push_back(builder.AddCompletionQueue());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server) {
    impl_->acceptor.reset();
    throw std::runtime_error("cannot listen for gRPC on " + impl_->options.address);
  }
  for (auto& q : impl_->queues) {
    ::grpc::ServerCompletionQueue* cq = q.get();
    // A few calls waiting per queue, so a burst of new calls is not serialised behind one.
    for (int i = 0; i < 8; ++i) Impl::Call::start(*impl_, impl_->rls, cq);
    impl_->health.start(cq);
    impl_->threads.emplace_back([cq] {
      void* tag;
      bool ok;
      while (cq->Next(&tag, &ok)) static_cast<CqTag*>(tag)->proceed(ok);
    });
  }
  impl_->acceptor->start([external = impl_->external.get()](int listener_fd, int fd) {
    ::grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
    connection.listener_fd = listener_fd;
    connection.fd = fd;
    external->HandleNewConnection(&connection);
  });
  set_serving(true);
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::set_serving(bool serving) {
  if (impl_->server) impl_->health.set_serving(serving);
}

void GrpcServer::install_tls(std::shared_ptr<const server::tls::TlsPem> pem) {
  if (impl_->tls && pem) impl_->tls->install(*pem);
}

void GrpcServer::reload_tls() {
  if (impl_->tls) impl_->tls->install(*server::tls::read_tls_files(tls_files(impl_->options)));
}

void GrpcServer::stop(std::chrono::milliseconds finish) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->server || impl_->stopped) return;
  impl_->stopped = true;
  impl_->acceptor->stop();    // no new connection; those open are the server's to close
  impl_->health.shut_down();  // watchers hear NOT_SERVING and their streams end, so Shutdown need not wait for them
  impl_->server->Shutdown(std::chrono::system_clock::now() + finish);  // GOAWAY to every connection
  for (auto& q : impl_->queues) q->Shutdown();  // after the server: calls still queued are failed and deleted
  for (auto& t : impl_->threads) t.join();
}

}  // namespace rk::server::grpc
