// bench/grpc_h2_load.cc: a load generator for Envoy's rate-limit API that speaks gRPC the way Envoy itself does:
// over a plain HTTP/2 codec (libnghttp2, which Envoy's own codec is built on), not over libgrpc. Envoy's
// ratelimit filter calls the service through its "Envoy gRPC" client, which frames each call as an HTTP/2 POST on
// the cluster's connections: length-prefixed protobuf in DATA, grpc-status in the trailers. Doing the same here
// makes the client cost per call about what Envoy pays, so the server's throughput is what a benchmark measures,
// not libgrpc's client (bench/grpc_load.cc keeps that one, for comparison).
//
//   rk_grpc_h2_load 127.0.0.1:8081 [--seconds 5] [--inflight 64] [--connections 2] [--domain bench] [--key client]
//                   [--clients 1000] [--descriptors 1]
//
// One thread, one epoll loop, non-blocking sockets. `inflight` calls are spread over `connections` HTTP/2
// connections (Envoy opens one per worker thread); each finished call starts the next until the time is up. Each
// call carries one descriptor {key: client-N} for N in 0..clients-1 in turn (--clients 1: one hot key), or that
// descriptor --descriptors times (a request decided against several limits, as Envoy sends them), is serialised
// with the generated protobuf classes, and its answer is checked: HTTP 200, grpc-status 0, one well-formed
// length-prefixed RateLimitResponse. Prints the same line as rk_grpc_load (its decisions/s are calls/s), then the
// count of answers that passed those checks (the OK ones are answered - over_limit):
//   decisions/s N p50_ms X p99_ms Y failed F over_limit O answered A
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace {

namespace pb = envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

constexpr char kPath[] = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

struct Stats {
  std::vector<double> latencies_ms;
  std::size_t failed = 0;
  std::size_t over_limit = 0;
  std::string first_error;

  void fail(std::string why) {
    if (failed++ == 0) first_error = std::move(why);
  }
};

struct Connection;

// One call: the framed request going out, the response's DATA and headers coming back.
struct Call {
  Connection* conn = nullptr;
  std::string frame;  // 5-byte gRPC prefix + RateLimitRequest
  std::size_t sent = 0;
  std::string body;
  int http_status = 0;
  int grpc_status = -1;  // from the trailers, or from the headers of a trailers-only answer
  std::string grpc_message;
  Clock::time_point started;
};

struct Load;

struct Connection {
  Load* load = nullptr;
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::string out;  // serialised frames not yet written to the socket
  std::size_t out_off = 0;
  int open_calls = 0;
  int target_calls = 0;
  bool want_epollout = false;
};

struct Load {
  std::string authority, domain, key;
  Clock::time_point end;
  Stats stats;
  std::size_t next_client = 0;
  std::size_t clients = 1000;
  int descriptors = 1;
  int epfd = -1;
  bool broken = false;
};

std::string encode_request(const Load& load, std::size_t client) {
  pb::RateLimitRequest req;
  req.set_domain(load.domain);
  const std::string value = "client-" + std::to_string(client);
  for (int i = 0; i < load.descriptors; ++i) {
    auto* e = req.add_descriptors()->add_entries();
    e->set_key(load.key);
    e->set_value(value);
  }
  const std::string msg = req.SerializeAsString();
  std::string frame(5, '\0');
  const auto n = static_cast<std::uint32_t>(msg.size());
  frame[1] = static_cast<char>(n >> 24);
  frame[2] = static_cast<char>(n >> 16);
  frame[3] = static_cast<char>(n >> 8);
  frame[4] = static_cast<char>(n);
  return frame + msg;
}

ssize_t read_request(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                     nghttp2_data_source* source, void*) {
  auto* call = static_cast<Call*>(source->ptr);
  const std::size_t n = std::min(length, call->frame.size() - call->sent);
  std::memcpy(buf, call->frame.data() + call->sent, n);
  call->sent += n;
  if (call->sent == call->frame.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

nghttp2_nv header(const char* name, const std::string& value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name)),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), std::strlen(name), value.size(),
          NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

bool start_call(Connection& c) {
  Load& load = *c.load;
  auto call = std::make_unique<Call>();
  call->conn = &c;
  call->frame = encode_request(load, load.next_client++ % load.clients);
  call->started = Clock::now();
  static const std::string post = "POST", http = "http", path = kPath, grpc = "application/grpc", trailers = "trailers",
                           agent = "rk-grpc-h2-load";
  const nghttp2_nv headers[] = {
      header(":method", post),    header(":scheme", http),      header(":authority", load.authority),
      header(":path", path),      header("content-type", grpc), header("te", trailers),
      header("user-agent", agent)};
  nghttp2_data_provider body;
  body.source.ptr = call.get();
  body.read_callback = read_request;
  const std::int32_t id = nghttp2_submit_request(c.session, nullptr, headers, std::size(headers), &body, call.get());
  if (id < 0) {
    load.stats.fail(std::string("submit_request: ") + nghttp2_strerror(id));
    return false;
  }
  call.release();  // owned by the stream until on_stream_close
  ++c.open_calls;
  return true;
}

int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
              const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* call = static_cast<Call*>(
      nghttp2_session_get_stream_user_data(static_cast<Connection*>(user)->session, frame->hd.stream_id));
  if (!call) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") call->http_status = std::atoi(std::string(v).c_str());
  else if (n == "grpc-status") call->grpc_status = std::atoi(std::string(v).c_str());
  else if (n == "grpc-message") call->grpc_message = v;
  return 0;
}

int on_data(nghttp2_session* session, std::uint8_t, std::int32_t stream_id, const std::uint8_t* data, std::size_t len,
            void*) {
  if (auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, stream_id))) {
    call->body.append(reinterpret_cast<const char*>(data), len);
  }
  return 0;
}

// Checks one finished call's answer the way a gRPC client must, and records it.
void finish(Call& call, std::uint32_t error_code, Stats& stats) {
  const auto now = Clock::now();
  if (error_code != NGHTTP2_NO_ERROR) return stats.fail("stream reset, HTTP/2 error " + std::to_string(error_code));
  if (call.http_status != 200) return stats.fail(":status " + std::to_string(call.http_status));
  if (call.grpc_status != 0) {
    return stats.fail("grpc-status " + std::to_string(call.grpc_status) + " " + call.grpc_message);
  }
  const std::string& b = call.body;
  if (b.size() < 5 || b[0] != 0) return stats.fail("no uncompressed gRPC message in the answer");
  const std::size_t n = (std::size_t{static_cast<std::uint8_t>(b[1])} << 24) |
                        (std::size_t{static_cast<std::uint8_t>(b[2])} << 16) |
                        (std::size_t{static_cast<std::uint8_t>(b[3])} << 8) | static_cast<std::uint8_t>(b[4]);
  pb::RateLimitResponse resp;
  if (b.size() != 5 + n || !resp.ParseFromArray(b.data() + 5, static_cast<int>(n))) {
    return stats.fail("malformed RateLimitResponse");
  }
  stats.latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - call.started).count());
  stats.over_limit += resp.overall_code() == pb::RateLimitResponse::OVER_LIMIT;
}

int on_stream_close(nghttp2_session* session, std::int32_t stream_id, std::uint32_t error_code, void* user) {
  auto* c = static_cast<Connection*>(user);
  std::unique_ptr<Call> call(static_cast<Call*>(nghttp2_session_get_stream_user_data(session, stream_id)));
  if (!call) return 0;
  --c->open_calls;
  finish(*call, error_code, c->load->stats);
  return 0;
}

// Serialises whatever the session has to send and writes as much as the socket takes; the rest waits for EPOLLOUT.
bool flush(Connection& c) {
  for (;;) {
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
      const std::uint8_t* data;
      ssize_t n;
      while ((n = nghttp2_session_mem_send(c.session, &data)) > 0) c.out.append(reinterpret_cast<const char*>(data), n);
      if (n < 0) {
        c.load->stats.fail(std::string("mem_send: ") + nghttp2_strerror(static_cast<int>(n)));
        return false;
      }
      if (c.out.empty()) break;
    }
    const ssize_t w = ::write(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      c.load->stats.fail(std::string("write: ") + std::strerror(errno));
      return false;
    }
    c.out_off += static_cast<std::size_t>(w);
  }
  const bool want = c.out_off < c.out.size();
  if (want != c.want_epollout) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.ptr = &c;
    epoll_ctl(c.load->epfd, EPOLL_CTL_MOD, c.fd, &ev);
    c.want_epollout = want;
  }
  return true;
}

// Tops the connection up to its share of calls in flight while the run lasts.
bool refill(Connection& c) {
  if (Clock::now() >= c.load->end) return true;
  while (c.open_calls < c.target_calls) {
    if (!start_call(c)) return false;
  }
  return true;
}

bool on_readable(Connection& c) {
  std::uint8_t buf[65536];
  for (;;) {
    const ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n == 0) {
      c.load->stats.fail("server closed the connection");
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      c.load->stats.fail(std::string("read: ") + std::strerror(errno));
      return false;
    }
    const ssize_t used = nghttp2_session_mem_recv(c.session, buf, static_cast<std::size_t>(n));
    if (used < 0) {
      c.load->stats.fail(std::string("mem_recv: ") + nghttp2_strerror(static_cast<int>(used)));
      return false;
    }
    if (static_cast<std::size_t>(n) < sizeof buf) return true;
  }
}

int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return -1;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: rk_grpc_h2_load ADDR [--seconds N] [--inflight N] [--connections N] [--domain D] [--key K]"
                 " [--clients N] [--descriptors N]\n");
    return 2;
  }
  Load load;
  const std::string address = argv[1];
  load.authority = address;
  load.domain = "bench";
  load.key = "client";
  int seconds = 5, inflight = 64, connections = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--inflight")) inflight = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--connections")) connections = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--domain")) load.domain = argv[i + 1];
    else if (!std::strcmp(argv[i], "--key")) load.key = argv[i + 1];
    else if (!std::strcmp(argv[i], "--clients")) {
      load.clients = static_cast<std::size_t>(std::max(1, std::atoi(argv[i + 1])));
    } else if (!std::strcmp(argv[i], "--descriptors")) {
      load.descriptors = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "rk_grpc_h2_load: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  connections = std::min(connections, inflight);

  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);

  load.epfd = epoll_create1(0);
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < connections; ++i) {
    auto c = std::make_unique<Connection>();
    c->load = &load;
    c->fd = connect_to(address);
    if (c->fd < 0) {
      std::fprintf(stderr, "rk_grpc_h2_load: cannot connect to %s\n", address.c_str());
      return 1;
    }
    c->target_calls = inflight / connections + (i < inflight % connections ? 1 : 0);
    nghttp2_session_client_new(&c->session, callbacks, c.get());
    // Windows large enough that flow control never paces the run (Envoy's defaults are larger still).
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                               {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, 1 << 28);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    epoll_ctl(load.epfd, EPOLL_CTL_ADD, c->fd, &ev);
    conns.push_back(std::move(c));
  }
  nghttp2_session_callbacks_del(callbacks);

  const auto begin = Clock::now();
  load.end = begin + std::chrono::seconds(seconds);
  const auto give_up = load.end + std::chrono::seconds(10);
  load.stats.latencies_ms.reserve(static_cast<std::size_t>(seconds) * 200'000);
  for (auto& c : conns) {
    if (!refill(*c) || !flush(*c)) load.broken = true;
  }
  epoll_event events[16];
  auto open = [&] {
    int n = 0;
    for (auto& c : conns) n += c->open_calls;
    return n;
  };
  while (!load.broken && open() > 0 && Clock::now() < give_up) {
    const int n = epoll_wait(load.epfd, events, static_cast<int>(std::size(events)), 100);
    for (int i = 0; i < n && !load.broken; ++i) {
      auto& c = *static_cast<Connection*>(events[i].data.ptr);
      if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !on_readable(c)) load.broken = true;
      else if (!refill(c) || !flush(c)) load.broken = true;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  const std::size_t unfinished = static_cast<std::size_t>(open());
  if (unfinished > 0) {
    if (load.stats.failed == 0) load.stats.first_error = "calls unanswered at the end";
    load.stats.failed += unfinished;
  }
  for (auto& c : conns) {
    nghttp2_session_del(c->session);  // calls still open (counted failed above) are not ours to free at exit
    ::close(c->fd);
  }
  auto& lat = load.stats.latencies_ms;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return lat.empty() ? 0.0 : lat[static_cast<std::size_t>(p * static_cast<double>(lat.size() - 1))];
  };
  std::printf("decisions/s %.0f p50_ms %.3f p99_ms %.3f failed %zu over_limit %zu answered %zu\n",
              static_cast<double>(lat.size()) / elapsed, pct(0.50), pct(0.99), load.stats.failed, load.stats.over_limit,
              lat.size());
  if (load.stats.failed > 0)
    std::fprintf(stderr, "rk_grpc_h2_load: first failure: %s\n", load.stats.first_error.c_str());
  return load.stats.failed == 0 ? 0 : 1;
}
