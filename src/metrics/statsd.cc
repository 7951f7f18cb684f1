#include "metrics/statsd.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>

#include "base/periodic.h"

namespace rk::metrics::statsd {

namespace {

void append_fixed(std::string& out, double v) {
  char buf[400];  // 2^-64 in fixed notation is 66 characters; values are milliseconds
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (r.ec == std::errc{}) out.append(buf, r.ptr);
  else out += '0';
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::vector<Tag>> parse_tags(std::string_view text, std::string& error) {
  std::map<std::string, std::string, std::less<>> tags;
  if (trim(text).empty()) return std::vector<Tag>{};
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view entry = trim(text.substr(at, comma - at));
    at = comma + 1;
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
      error = "'" + std::string(entry) + "' is not key:value";
      return std::nullopt;
    }
    tags[std::string(trim(entry.substr(0, colon)))] = std::string(trim(entry.substr(colon + 1)));
  }
  std::vector<Tag> out;
  for (auto& [k, v] : tags) out.push_back({k, v});
  return out;
}

std::string tagged_name(std::string_view name, const std::vector<Tag>& tags) {
  std::string out(name);
  for (const Tag& t : tags) {
    out += ".__";
    out += t.key;
    out += '=';
    for (char c : t.value) out += (c == '.' || c == ':' || c == '|') ? '_' : c;
  }
  return out;
}

void append_counter(std::string& out, std::string_view name, std::uint64_t delta) {
  out += name;
  out += ':';
  append_uint(out, delta);
  out += "|c\n";
}

void append_gauge(std::string& out, std::string_view name, double value) {
  out += name;
  out += ':';
  append_fixed(out, value);
  out += "|g\n";
}

void append_timer(std::string& out, std::string_view name, double ms, std::uint64_t times) {
  for (int bit = 63; bit >= 0; --bit) {
    if (((times >> bit) & 1) == 0) continue;
    out += name;
    out += ':';
    append_fixed(out, ms);
    out += "|ms";
    if (bit > 0) {
      out += "|@";
      append_fixed(out, std::ldexp(1.0, -bit));
    }
    out += '\n';
  }
}

std::vector<std::string> pack(std::string_view lines, std::size_t max_bytes) {
  std::vector<std::string> out;
  std::string current;
  while (!lines.empty()) {
    const std::size_t nl = lines.find('\n');
    const std::size_t n = nl == std::string_view::npos ? lines.size() : nl + 1;
    const std::string_view line = lines.substr(0, n);
    lines.remove_prefix(n);
    if (!current.empty() && current.size() + line.size() > max_bytes) {
      out.push_back(std::move(current));
      current.clear();
    }
    current += line;
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

bool split_host_port(std::string_view address, std::string& host, std::uint16_t& port) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = address.substr(0, colon);
  const std::string_view p = address.substr(colon + 1);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string_view::npos) {
    return false;  // an IPv6 address needs its brackets
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (ec != std::errc{} || end != p.data() + p.size() || value < 1 || value > 65535) return false;
  host = std::string(h);
  port = static_cast<std::uint16_t>(value);
  return true;
}

// ---- Emitter

std::string Emitter::tagged(std::string_view name) { return tags_ ? tagged_name(name, *tags_) : std::string(name); }

void Emitter::counter(std::string_view name, std::uint64_t total) {
  std::string key = tagged(name);
  std::uint64_t& sent = counters_[key];
  if (total > sent) append_counter(lines_, key, total - sent);
  sent = total;  // a counter never goes down; one that did (a new series under the name) starts again from it
}

void Emitter::gauge(std::string_view name, double value) {
  if (std::isfinite(value)) append_gauge(lines_, tagged(name), value);
}

void Emitter::timer(std::string_view name, const Histogram& h) {
  std::string key = tagged(name);
  std::vector<std::uint64_t>& sent = timers_[key];
  const std::size_t buckets = h.bounds().size() + 1;
  sent.resize(buckets, 0);
  for (std::size_t i = 0; i < buckets; ++i) {
    const std::uint64_t now = h.bucket(i);
    if (now <= sent[i]) continue;
    // A bucket's samples as its upper bound; the +Inf bucket's as the last bound (they took at least that).
    const double seconds = h.bounds().empty() ? 0.0 : h.bounds()[std::min(i, h.bounds().size() - 1)];
    append_timer(lines_, key, seconds * 1000.0, now - sent[i]);
    sent[i] = now;
  }
}

// ---- Sink

struct Sink::Impl {
  SinkOptions options;
  Source source;
  std::string host;
  std::uint16_t port = 0;
  std::mutex mu;  // one flush at a time: the thread's, or stop()'s last, or a test's
  std::unique_ptr<Emitter> emitter;
  int fd = -1;
  bool stopped = false;  // under mu
  base::Periodic thread;

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  // A connected, non-blocking UDP socket to the address; false if it does not resolve.
  bool connect() {
    if (fd >= 0) return true;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return false;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(found);
    return fd >= 0;
  }

  void send(const std::vector<std::string>& datagrams, SinkStats& stats) {
    for (const std::string& d : datagrams) {
      if (!connect()) {
        stats.dropped.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (::send(fd, d.data(), d.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(d.size())) {
        stats.sent.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      stats.dropped.fetch_add(1, std::memory_order_relaxed);
      // Refused (the daemon's port closed) or a full buffer: the socket is fine. Anything else: resolve again.
      if (errno != ECONNREFUSED && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
        ::close(fd);
        fd = -1;
      }
    }
  }
};

Sink::Sink(SinkOptions options, Source source) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->source = std::move(source);
  if (!split_host_port(impl_->options.address, impl_->host, impl_->port)) {
    throw std::invalid_argument("'" + impl_->options.address + "' is not host:port");
  }
  impl_->emitter = std::make_unique<Emitter>(&impl_->options.tags);
}

Sink::~Sink() { stop(); }

void Sink::start() {
  impl_->thread.start(impl_->options.interval, [this] { flush(); });
}

void Sink::stop() {
  impl_->thread.stop();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  flush();  // what moved since the last flush
}

void Sink::flush() {
  std::lock_guard lock(impl_->mu);
  impl_->source(*impl_->emitter);
  const std::string lines = impl_->emitter->take();
  if (!lines.empty()) impl_->send(pack(lines, kMaxDatagramBytes), stats_);
}

}  // namespace rk::metrics::statsd
