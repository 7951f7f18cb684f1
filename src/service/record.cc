// service/record.cc: a checked decision recorded as a span (when the tracer samples it) and an access log line.
// Both are made from the answer once it is known, on the thread that answers (a server's, or the remote store's).
#include <chrono>
#include <string>

#include "base/json_string.h"
#include "logging/access_log.h"
#include "service/service.h"
#include "tracing/tracer.h"

namespace rk::service {

namespace {

std::uint64_t unix_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// What a decision is recorded with: the same facts for the span and the access log line.
struct Facts {
  std::string result;               // "OK", "OVER_LIMIT", or "INVALID" for a refused request
  std::vector<std::string> rules;   // each descriptor's matched rule ("" for none), in the request's order
  std::string store;                // "memory", "redis", "redis_batched"
  std::int64_t retry_after_ms = 0;  // the longest a refused descriptor must wait
  bool shadowed = false;
  std::string error;  // a refused request's reason, or the store's failure the domain's policy answered
};

Facts facts_of(const Service& service, const std::string& domain_name, const CheckResult& result) {
  Facts f;
  if (const auto* e = std::get_if<RequestError>(&result)) {
    f.result = "INVALID";
    f.error = e->field.empty() ? e->message : e->field + ": " + e->message;
    return f;
  }
  const auto& r = std::get<CheckResponse>(result);
  f.result = std::string(code_name(r.overall));
  const rules::DomainConfig* domain = r.rules ? r.rules->domain(domain_name) : nullptr;
  f.store = !service.uses_remote(domain)                                       ? "memory"
            : service.batcher() && domain->sharing == rules::Sharing::kBatched ? "redis_batched"
                                                                               : "redis";
  for (const DescriptorStatus& st : r.statuses) {
    f.rules.push_back(st.name);
    if (st.code == Code::kOverLimit) {
      f.retry_after_ms = std::max<std::int64_t>(
          f.retry_after_ms, std::chrono::duration_cast<std::chrono::milliseconds>(st.retry_after).count());
    }
    f.shadowed = f.shadowed || st.shadowed;
    if (st.fallback != rules::FailurePolicy::kDefault && f.error.empty()) {
      f.error = "the store did not answer: " + st.store_error;
    }
  }
  return f;
}

tracing::Span make_span(const tracing::SpanIds& ids, std::string trace_state, const std::string& domain,
                        std::string_view protocol, std::uint64_t start, std::uint64_t end, Facts f) {
  tracing::Span s{.trace_id = ids.trace_id,
                  .span_id = ids.span_id,
                  .parent_span_id = ids.parent_span_id,
                  .trace_state = std::move(trace_state),
                  .name = "ratekeeper.decide",
                  .start_unix_ns = start,
                  .end_unix_ns = end};
  s.attributes.emplace_back("ratelimit.domain", domain);
  if (!protocol.empty()) s.attributes.emplace_back("ratelimit.protocol", std::string(protocol));
  s.attributes.emplace_back("ratelimit.result", f.result);
  if (f.result != "INVALID") {
    s.attributes.emplace_back("ratelimit.descriptors", static_cast<std::int64_t>(f.rules.size()));
    s.attributes.emplace_back("ratelimit.rules", std::move(f.rules));
    s.attributes.emplace_back("ratelimit.store", f.store);
    s.attributes.emplace_back("ratelimit.retry_after_ms", f.retry_after_ms);
    if (f.shadowed) s.attributes.emplace_back("ratelimit.shadowed", true);
  }
  s.error = !f.error.empty();
  s.status_message = std::move(f.error);
  return s;
}

std::string access_fields(const std::string& domain, std::string_view protocol, const Facts& f,
                          std::uint64_t duration_ns, const tracing::Parent& parent,
                          const std::optional<tracing::SpanIds>& ids) {
  std::string out = "\"msg\":\"decision\",\"protocol\":";
  base::append_json_string(out, protocol);
  out += ",\"domain\":";
  base::append_json_string(out, domain);
  out += ",\"result\":\"" + f.result + "\"";
  if (f.result != "INVALID") {
    out += ",\"store\":\"" + f.store + "\",\"rules\":[";
    for (std::size_t i = 0; i < f.rules.size(); ++i) {
      if (i) out += ',';
      base::append_json_string(out, f.rules[i]);
    }
    out += "],\"retry_after_ms\":" + std::to_string(f.retry_after_ms);
    if (f.shadowed) out += ",\"shadowed\":true";
  }
  out += ",\"duration_us\":" + std::to_string(duration_ns / 1000);
  if (ids || parent.has_ids) out += ",\"trace_id\":\"" + tracing::to_hex(ids ? ids->trace_id : parent.trace_id) + "\"";
  if (ids) out += ",\"span_id\":\"" + tracing::to_hex(ids->span_id) + "\"";
  if (!f.error.empty()) {
    out += ",\"error\":";
    base::append_json_string(out, f.error);
  }
  return out;
}

}  // namespace

CheckDone Service::recorded(const CheckRequest& request, CheckDone done) {
  std::optional<tracing::SpanIds> ids;
  if (options_.tracer) ids = options_.tracer->start(request.trace);
  if (!ids && !options_.access_log) return done;
  return [this, ids, parent = request.trace, domain = request.domain, protocol = request.protocol, start = unix_ns(),
          done = std::move(done)](CheckResult result) mutable {
    const std::uint64_t end = unix_ns();
    Facts f = facts_of(*this, domain, result);
    if (options_.access_log) {
      options_.access_log->write(access_fields(domain, protocol, f, end - start, parent, ids));
    }
    if (ids)
      options_.tracer->finish(
          make_span(*ids, std::move(parent.trace_state), domain, protocol, start, end, std::move(f)));
    done(std::move(result));
  };
}

}  // namespace rk::service
