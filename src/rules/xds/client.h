// rules/xds/client.h: the rules pushed by a control plane over xDS (the Aggregated Discovery Service, State of the
// World), as envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW takes them, applied to a Reloader.
//
//   rk::rules::xds::Client xds(reloader, options, events);  // throws std::invalid_argument: bad TLS file, metadata
//   xds.start();   // connects, and keeps connecting, on a thread of its own
//   xds.stop();    // before the reloader goes
//
// The client subscribes to kRateLimitConfigType (rules/xds/convert.h). Each response is converted to rules files
// and loaded by Reloader::load_files(), so a push passes the checks a file passes and a rule it leaves unchanged
// keeps its counters; it is then ACKed (its version_info and nonce). A response that cannot load is NACKed: the
// nonce, the last applied version_info and an error_detail naming the reason, and nothing changes. Pushes are
// applied on the client's thread, never on a decision's.
//
// When the stream ends or cannot be opened, decisions go on with the rules in force. A stream that was up is opened
// again after retry_interval; attempts that fail in a row wait backoff_initial, doubling to backoff_max (each
// spread by +-backoff_random_factor with jitter on). The first request on a new stream carries the last applied
// version_info.
//
// Thread safety: start() and stop() from one thread; the events are called on the client's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rules/reloader.h"
#include "rules/xds/options.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace rk::rules::xds {

struct XdsEvents {
  std::function<void(bool connected)> on_connected;
  // A push applied (version: its version_info) or refused (error: why; version: the last applied one).
  std::function<void(bool applied, const std::string& version, const std::string& error)> on_push;
};

class Client {
 public:
  Client(Reloader& rules, XdsOptions options, XdsEvents events = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void start();
  void stop();

  // The version_info of the last push applied ("" before the first).
  std::string applied_version() const;

  struct Impl;  // the gRPC side, in client.cc

 private:
  void run();
  void session(const std::shared_ptr<grpc::Channel>& channel);  // one stream, until it ends or stop()
  bool wait(Nanos delay);                                       // false once stopping

  Reloader& rules_;
  const XdsOptions options_;
  const XdsEvents events_;
  std::unique_ptr<Impl> impl_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                  // under mu_
  grpc::ClientContext* stream_ = nullptr;  // under mu_: the open stream's, cancelled by stop()
  std::string applied_version_;            // under mu_
  std::thread thread_;
};

}  // namespace rk::rules::xds
