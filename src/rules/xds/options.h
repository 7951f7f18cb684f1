// rules/xds/options.h: how ratekeeper reaches the control plane that pushes its rules over xDS (serve's --xds-*
// flags, docs/envoy-gateway.md). No gRPC here: the flags are read whether or not the client is built.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "ratekeeper/units.h"

namespace rk::rules::xds {

struct XdsOptions {
  std::string server;  // HOST:PORT of the Aggregated Discovery Service; empty: no xDS
  std::string node_id = "default";
  std::string node_metadata;                                 // a JSON object, the Node's metadata; empty: none
  std::vector<std::pair<std::string, std::string>> headers;  // sent as gRPC metadata on the stream
  bool tls = false;               // TLS with the system's CAs unless tls_ca is given (then TLS anyway)
  std::string tls_ca;             // the CAs (PEM) the control plane's certificate must chain to
  std::string tls_cert, tls_key;  // this client's certificate and key (PEM), for mutual TLS
  std::string tls_san;            // the name the control plane's certificate must carry (default: the host of `server`)
  // envoyproxy/ratelimit's defaults: a stream that was up is retried after retry_interval; attempts that fail in a
  // row wait backoff_initial, doubling to backoff_max, each spread by +-random_factor when jitter is on.
  Nanos retry_interval = std::chrono::seconds(3);
  Nanos backoff_initial = std::chrono::seconds(10);
  Nanos backoff_max = std::chrono::seconds(60);
  double backoff_random_factor = 0.5;
  bool backoff_jitter = true;
};

}  // namespace rk::rules::xds
