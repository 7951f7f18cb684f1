// dashboard/dashboard.h: the dashboard on the admin listener: its page (built into the binary from
// src/dashboard/assets/ at build time, no CDN) and the JSON it polls. routes.h maps the paths:
//
//   GET  /ui, /ui/app.js, /ui/app.css      the page (asset())
//   GET  /v1/admin/hot-keys?n=10&domain=D&rule=PATH   per rule, the n hottest keys and their state (hot_keys_json)
//   GET  /v1/admin/rates?history=1         per rule, decisions by result since the start, and with history=1 the
//                                          counters of the last minutes, sampled every second (rates_json)
//   POST /v1/admin/simulate                a what-if (what_if.h)
//
// The state of a hot key is read with peek (nothing is recorded, nothing charged); hotness comes from the Tracker's
// sketch, so no request scans the store, however many keys it holds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "service/service.h"
#include "dashboard/tracker.h"
#include "dashboard/what_if.h"

namespace rk::dashboard {

struct Asset {
  std::string_view content_type;
  std::string_view body;
};

// The page's files by request path ("/ui", "/ui/", "/ui/app.js", "/ui/app.css"); null for any other.
const Asset* asset(std::string_view path);

// What the page may load: its own scripts, styles and JSON, nothing inline, nothing from elsewhere, no framing.
inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// GET /v1/admin/hot-keys. The query: n (1 to the tracker's capacity, default 10), domain and rule (a descriptor
// path) to narrow it; anything else, or a bad value, is an error naming the parameter.
std::variant<std::string, WhatIfError> hot_keys_json(service::Service& service, const Tracker& tracker,
                                                     std::string_view query);

// GET /v1/admin/rates: counters the page turns into rates by difference. The query: history=1 adds each rule's
// samples (tracker.h), so that a page just opened draws the last minutes; anything else is an error naming it.
std::variant<std::string, WhatIfError> rates_json(const service::Service& service, const Tracker& tracker,
                                                  std::string_view query = "");

// A query string's value for a name, percent-decoded; nullopt when absent or badly encoded (see decode_query).
struct QueryParam {
  std::string name;
  std::string value;
};
// Splits "a=1&b=x%20y" into its parameters; false when a name or value is badly percent-encoded.
bool decode_query(std::string_view query, std::vector<QueryParam>& out);

}  // namespace rk::dashboard
