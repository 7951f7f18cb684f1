// metrics/statsd.h: counters, gauges and timers sent to a statsd daemon over UDP, the way envoyproxy/ratelimit's
// statistics library (lyft/gostats) writes them, so that a statsd daemon or statsd_exporter fed by upstream reads
// ratekeeper the same.
//
//   auto tags = rk::metrics::statsd::parse_tags("env:prod,zone:a", error);   // EXTRA_TAGS' format
//   rk::metrics::statsd::Sink sink({.address = "127.0.0.1:8125", .tags = *tags, .interval = 10s},
//                                  [&](rk::metrics::statsd::Emitter& e) { e.counter("a.b", hits.value()); });
//   sink.start();   // a thread: every interval, the source's values as lines, packed into datagrams, sent
//   sink.stop();    // one last flush, then the thread ends
//
// What goes on the wire (gostats' formats): a counter's increase since the last flush, "name:N|c", and only when it
// moved; a gauge's value, "name:V|g", every flush; a timer's samples, "name:V|ms", in milliseconds. Timers come from
// a Histogram (the same one Prometheus reads): each bucket's new observations are sent as its upper bound with a
// sample rate, one line per power of two in the count ("|@0.25" is four samples), so that both Etsy's statsd and
// statsd_exporter count exactly what was observed however busy the server was. Tags (gostats' ScopeWithTags) are
// appended to every name as ".__key=value", sorted by key, with '.', ':' and '|' in values made '_'.
//
// Off the decision path: the source reads atomics on the sink's thread; decisions never wait on it. Datagrams go
// out of a non-blocking UDP socket of at most 1432 bytes each (no IP fragmentation on an Ethernet path, as gostats
// sizes them); one the kernel refuses, or that a down daemon's port rejects (ICMP, reported on the next send), is
// lost and counted (stats().dropped). The address is resolved at the first flush and again after a failure.
//
// Thread safety: start() and stop() from one thread; stats() from any. The source and the delta state run on the
// sink's thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "metrics/registry.h"

namespace rk::metrics::statsd {

struct Tag {
  std::string key, value;
};

// "k1:v1,k2:v2" (upstream's EXTRA_TAGS): sorted by key, a key given twice keeps its last value, as upstream's map
// does. nullopt and `error` ("'k1' has no ':value'") for an entry without a key, a ':' or a value. "" is no tags.
std::optional<std::vector<Tag>> parse_tags(std::string_view text, std::string& error);

// gostats' serialization: name + ".__key=value" per tag in order, '.', ':' and '|' in values replaced by '_'.
std::string tagged_name(std::string_view name, const std::vector<Tag>& tags);

// One line each, '\n'-terminated. Numbers in fixed notation (Etsy's statsd reads a sample rate as [0-9.]+ only).
void append_counter(std::string& out, std::string_view name, std::uint64_t delta);
void append_gauge(std::string& out, std::string_view name, double value);
// `times` samples of `ms`: one line per set bit of `times`, each "|@2^-k" written in the shortest fixed form that
// reads back as exactly 2^-k, so that a daemon's 1/rate is exactly 2^k.
void append_timer(std::string& out, std::string_view name, double ms, std::uint64_t times);

// Lines into datagrams of at most max_bytes, whole lines each (a single longer line goes alone).
std::vector<std::string> pack(std::string_view lines, std::size_t max_bytes);
inline constexpr std::size_t kMaxDatagramBytes = 1432;

// "host:port" or "[v6]:port" into its parts; false for anything else (port 1 to 65535).
bool split_host_port(std::string_view address, std::string& host, std::uint16_t& port);

// What one flush writes: the source calls these with cumulative values; the emitter keeps what it sent last.
class Emitter {
 public:
  explicit Emitter(const std::vector<Tag>* tags = nullptr) : tags_(tags) {}
  void counter(std::string_view name, std::uint64_t total);
  void gauge(std::string_view name, double value);
  // Milliseconds: the histogram's bounds are seconds.
  void timer(std::string_view name, const Histogram& histogram);
  // The lines written since the last take().
  std::string take() { return std::exchange(lines_, {}); }

 private:
  std::string tagged(std::string_view name);
  const std::vector<Tag>* tags_;
  std::string lines_;
  std::unordered_map<std::string, std::uint64_t> counters_;             // name -> total sent up to
  std::unordered_map<std::string, std::vector<std::uint64_t>> timers_;  // name -> bucket counts sent up to
};

struct SinkOptions {
  std::string address;  // host:port
  std::vector<Tag> tags;
  std::chrono::nanoseconds interval = std::chrono::seconds(10);  // upstream's STATS_FLUSH_INTERVAL default
};

struct SinkStats {
  std::atomic<std::uint64_t> sent{0};     // datagrams handed to the kernel
  std::atomic<std::uint64_t> dropped{0};  // datagrams lost: refused, unreachable, or the address unresolved
};

class Sink {
 public:
  using Source = std::function<void(Emitter&)>;
  Sink(SinkOptions options, Source source);
  ~Sink();
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void start();
  void stop();
  // One flush now, on the caller's thread (tests; stop() ends with one). Not concurrently with the thread's.
  void flush();
  const SinkStats& stats() const { return stats_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  SinkStats stats_;
};

}  // namespace rk::metrics::statsd
