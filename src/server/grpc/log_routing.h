// server/grpc/log_routing.h: gRPC's and protobuf's own log lines through ours (logging/log.h): one JSON object a
// line, each source line of theirs an event of its own, so that a flood of one (a failed handshake per connection,
// a request with bad UTF-8 per call) is held back and counted rather than written line by line.
//
//   route_grpc_logs();   // once per process is enough; GrpcServer's constructor calls it
//
// gRPC logs errors only (its verbosity set to ERROR), unless GRPC_VERBOSITY asks for more.
//
// Thread safety: any thread; the first call does it, later ones nothing.
#pragma once

namespace rk::server::grpc {

void route_grpc_logs();

}  // namespace rk::server::grpc
