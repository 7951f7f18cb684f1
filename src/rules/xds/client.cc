// rules/xds/client.cc: the ADS stream, its connection and reconnection, and each push applied or refused
// (rules/xds/client.h).
#include "rules/xds/client.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <random>

#include "base/secret_file.h"
#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "logging/log.h"
#include "ratekeeper/ratekeeper.h"
#include "rules/xds/convert.h"

namespace rk::rules::xds {

namespace discovery = ::envoy::service::discovery::v3;
using logging::Level;

namespace {

// A channel that never came up within this is given up on, and the next attempt waits its backoff.
constexpr auto kConnectTimeout = std::chrono::seconds(20);
// How often a wait for the channel looks whether stop() was asked for.
constexpr auto kStopCheck = std::chrono::milliseconds(100);
// A push holds up to every domain's rules: as large as a directory of rules files may be.
constexpr int kMaxPushBytes = 64 << 20;
// A refusal's error_detail names problems up to this many bytes.
constexpr std::size_t kMaxErrorDetail = 64 << 10;
// google.rpc.Code INVALID_ARGUMENT, the code of a refused push's error_detail.
constexpr int kInvalidArgument = 3;

// A PEM file's text; throws std::invalid_argument naming the flag and the file.
std::string pem_file(const char* flag, const std::string& path) { return *base::SecretFile(flag, path).current(); }

std::shared_ptr<grpc::ChannelCredentials> credentials(const XdsOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    throw std::invalid_argument("--xds-tls-cert and --xds-tls-key are given together (mutual TLS) or not at all");
  }
  if (!o.tls && o.tls_ca.empty() && o.tls_cert.empty()) {
    if (!o.tls_san.empty()) throw std::invalid_argument("--xds-tls-san: given without TLS (--xds-tls, --xds-tls-ca)");
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  if (!o.tls_ca.empty()) ssl.pem_root_certs = pem_file("--xds-tls-ca", o.tls_ca);  // else the system's
  if (!o.tls_cert.empty()) {
    ssl.pem_cert_chain = pem_file("--xds-tls-cert", o.tls_cert);
    ssl.pem_private_key = pem_file("--xds-tls-key", o.tls_key);
  }
  return grpc::SslCredentials(ssl);
}

// Every error, "; "-separated, within kMaxErrorDetail bytes: the rest counted, so that a NACK always fits in a
// message the control plane takes.
std::string joined(const std::vector<ConfigError>& errors) {
  std::string out;
  std::size_t shown = 0;
  for (const ConfigError& e : errors) {
    const std::string one = e.to_string();
    if (out.size() + one.size() > kMaxErrorDetail) break;
    out += (out.empty() ? "" : "; ") + one;
    ++shown;
  }
  if (shown < errors.size()) out += "; and " + std::to_string(errors.size() - shown) + " more";
  return out;
}

discovery::DiscoveryRequest request(const std::string& version, const std::string& nonce) {
  discovery::DiscoveryRequest r;
  r.set_type_url(kRateLimitConfigType);
  r.set_version_info(version);
  r.set_response_nonce(nonce);
  return r;
}

}  // namespace

struct Client::Impl {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  ::envoy::config::core::v3::Node node;
  std::mt19937_64 random{std::random_device{}()};
};

Client::Client(Reloader& rules, XdsOptions options, XdsEvents events)
    : rules_(rules), options_(std::move(options)), events_(std::move(events)), impl_(std::make_unique<Impl>()) {
  impl_->creds = credentials(options_);
  // The control plane's certificate is checked for this name instead of the host's (SAN, or the CN without one).
  if (!options_.tls_san.empty()) impl_->args.SetSslTargetNameOverride(options_.tls_san);
  // Each attempt on a channel of its own, with a subchannel of its own: gRPC's own reconnection backoff, which a
  // shared subchannel would carry over, never adds to ours.
  impl_->args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  impl_->args.SetMaxReceiveMessageSize(kMaxPushBytes);
  impl_->node.set_id(options_.node_id);
  impl_->node.set_user_agent_name("ratekeeper");
  impl_->node.set_user_agent_version(rk_version());
  if (!options_.node_metadata.empty()) {
    const auto status =
        google::protobuf::util::JsonStringToMessage(options_.node_metadata, impl_->node.mutable_metadata());
    if (!status.ok()) {
      throw std::invalid_argument("--xds-node-metadata: '" + options_.node_metadata + "' is not a JSON object (" +
                                  std::string(status.message()) + ")");
    }
  }
}

Client::~Client() { stop(); }

void Client::start() {
  thread_ = std::thread([this] { run(); });
}

void Client::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (stream_) stream_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Client::applied_version() const {
  std::lock_guard lock(mu_);
  return applied_version_;
}

bool Client::wait(Nanos delay) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, delay, [this] { return stopping_; });
  return !stopping_;
}

namespace {

// `d` spread by +-factor, uniformly.
Nanos spread(Nanos d, double factor, std::mt19937_64& random) {
  if (factor <= 0) return d;
  std::uniform_real_distribution<double> u(1 - factor, 1 + factor);
  return Nanos{static_cast<std::int64_t>(static_cast<double>(d.count()) * u(random))};
}

// The channel READY within kConnectTimeout, or false (a failure, or stop() asked for: `stopping`).
bool connect(grpc::Channel& channel, const std::function<bool()>& stopping) {
  const auto give_up = std::chrono::steady_clock::now() + kConnectTimeout;
  while (!stopping() && std::chrono::steady_clock::now() < give_up) {
    const grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return true;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return false;
    channel.WaitForStateChange(state, std::chrono::system_clock::now() + kStopCheck);
  }
  return false;
}

}  // namespace

void Client::session(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  for (const auto& [key, value] : options_.headers) context.AddMetadata(key, value);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stream_ = &context;  // a cancel before the call starts cancels it as it starts
  }
  auto stub = discovery::AggregatedDiscoveryService::NewStub(channel);
  auto stream = stub->StreamAggregatedResources(&context);
  if (events_.on_connected) events_.on_connected(true);
  const std::string resumed = applied_version();
  logging::log(Level::kInfo, "xds: subscribed to the control plane's rules",
               {{"server", options_.server}, {"node", options_.node_id}, {"version", resumed}});
  discovery::DiscoveryRequest first = request(resumed, "");
  *first.mutable_node() = impl_->node;
  bool open = stream->Write(first);
  discovery::DiscoveryResponse push;
  while (open && stream->Read(&push)) {
    std::vector<RulesFile> files;
    std::string error = response_to_files(push, files);
    if (error.empty()) error = joined(rules_.load_files(files));
    std::string version;
    {
      std::lock_guard lock(mu_);
      if (error.empty()) applied_version_ = push.version_info();
      version = applied_version_;
    }
    discovery::DiscoveryRequest reply = request(version, push.nonce());
    if (error.empty()) {
      logging::log(Level::kInfo, "xds: push applied", {{"version", version}, {"nonce", push.nonce()}});
    } else {
      reply.mutable_error_detail()->set_code(kInvalidArgument);
      reply.mutable_error_detail()->set_message(error);
      logging::log(Level::kError, "xds: push refused; keeping the rules in force",
                   {{"version", push.version_info()}, {"nonce", push.nonce()}, {"error", error}});
    }
    if (events_.on_push) events_.on_push(error.empty(), version, error);
    open = stream->Write(reply);
  }
  {
    std::lock_guard lock(mu_);
    stream_ = nullptr;
  }
  context.TryCancel();  // Finish() returns at once, even after a failed Write
  const grpc::Status status = stream->Finish();
  if (events_.on_connected) events_.on_connected(false);
  logging::log(Level::kInfo, "xds: stream closed",
               {{"code", std::to_string(status.error_code())}, {"message", status.error_message()}});
}

void Client::run() {
  int failures = 0;  // attempts failed in a row
  while (true) {
    const auto channel = grpc::CreateCustomChannel(options_.server, impl_->creds, impl_->args);
    const bool up = connect(*channel, [this] {
      std::lock_guard lock(mu_);
      return stopping_;
    });
    Nanos delay{};
    if (up) {
      failures = 0;
      session(channel);
      delay = options_.retry_interval;
    } else {
      delay = options_.backoff_initial;  // doubled per failure before this one, up to the maximum
      for (int i = 0; i < failures && delay < options_.backoff_max; ++i) delay *= 2;
      delay = std::min(delay, options_.backoff_max);
      ++failures;
    }
    if (options_.backoff_jitter) delay = spread(delay, options_.backoff_random_factor, impl_->random);
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const auto delay_ms = std::chrono::duration_cast<std::chrono::milliseconds>(delay).count();
    logging::log(up ? Level::kInfo : Level::kError,
                 up ? "xds: the control plane's stream ended; keeping the rules in force"
                    : "xds: cannot connect to the control plane; keeping the rules in force",
                 {{"server", options_.server}, {"retry_in_ms", std::to_string(delay_ms)}});
    if (!wait(delay)) return;
  }
}

}  // namespace rk::rules::xds
