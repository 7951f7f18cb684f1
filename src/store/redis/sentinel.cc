// store/redis/sentinel.cc: the exchange with each sentinel (sentinel.h).
#include "store/redis/sentinel.h"

#include <stdexcept>

namespace rk::store::redis {

namespace asio = boost::asio;
using error_code = boost::system::error_code;

namespace {

// A sentinel's answer is two short strings: a parser with room for little more keeps a hostile one from making us
// buffer megabytes within the exchange's deadline.
constexpr ParserLimits kSentinelLimits{.max_bulk = 1024, .max_elements = 16, .max_depth = 2};

// SENTINEL get-master-addr-by-name's answer, or nullopt (nil: the sentinel does not know the name).
std::optional<Endpoint> primary_from(const Reply& r) {
  if (r.type != Reply::Type::kArray || r.elements.size() != 2) return std::nullopt;
  try {
    return parse_endpoint(r.elements[0].str + ":" + r.elements[1].str, "sentinel's answer");
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace

SentinelAsker::SentinelAsker(asio::io_context& ioc, const ClientOptions& options,
                             std::shared_ptr<asio::ssl::context> tls, std::atomic<std::uint64_t>& tls_failures)
    : ioc_(ioc),
      options_(options),
      tls_(std::move(tls)),
      tls_failures_(tls_failures),
      timer_(ioc),
      parser_(kSentinelLimits) {}

void SentinelAsker::ask(Done done) {
  cancel();
  last_failure_.clear();
  done_ = std::move(done);
  ask_turn(0);
}

void SentinelAsker::cancel() {
  ++gen_;
  if (link_) link_->close();
  link_.reset();
  timer_.cancel();
}

void SentinelAsker::answer(std::optional<Endpoint> primary) {
  cancel();
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(primary));
}

// This sentinel failed, or said nothing useful in time: the next one.
void SentinelAsker::next(std::size_t turn) {
  cancel();
  ask_turn(turn + 1);
}

void SentinelAsker::ask_turn(std::size_t turn) {
  if (turn >= options_.endpoints.size()) return answer(std::nullopt);
  const Endpoint& sentinel = options_.endpoints[turn];
  const std::uint64_t gen = ++gen_;
  link_ = std::make_shared<Link>(ioc_, tls_, options_.tls_files.server_name);
  parser_ = Parser(kSentinelLimits);
  std::string question;
  encode(question, {"SENTINEL", "get-master-addr-by-name", options_.primary_name});
  timer_.expires_after(options_.connect_timeout);
  timer_.async_wait([this, gen, turn](error_code e) {
    if (!e && gen == gen_) next(turn);
  });
  link_->open(sentinel, [this, gen, turn, question](const std::optional<LinkFailure>& failed) {
    if (gen != gen_) return;
    if (failed) {
      if (failed->tls) tls_failures_.fetch_add(1, std::memory_order_relaxed);
      last_failure_ = failed->message;
      return next(turn);
    }
    link_->write(question, [this, gen, turn](error_code written) {
      if (gen != gen_) return;
      if (written) return next(turn);
      read(gen, turn);
    });
  });
}

void SentinelAsker::read(std::uint64_t gen, std::size_t turn) {
  link_->read([this, gen, turn](error_code e, std::string_view bytes) {
    if (gen != gen_) return;
    if (e) return next(turn);
    parser_.feed(bytes);
    if (auto r = parser_.next()) {
      std::optional<Endpoint> primary = primary_from(*r);
      if (!primary) return next(turn);  // nil: this sentinel does not know the name
      return answer(std::move(primary));
    }
    if (parser_.failed()) return next(turn);
    read(gen, turn);
  });
}

}  // namespace rk::store::redis
