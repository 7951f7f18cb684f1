// dashboard/routes.h: the dashboard's routes on the admin listener (server/api/routes.h's AdminRoute), which serve
// adds where it wires the service:
//
//   server::api::AdminOptions admin{.routes = {dashboard::admin_routes(service, tracker, hooks)}};
//
//   GET /ui (and its files), GET /v1/admin/hot-keys, GET /v1/admin/rates (dashboard.h), POST /v1/admin/simulate
//   (what_if.h: on a thread of its own, one at a time, never on the listener's)
//
// They are asked after the admin listener's own-page checks and token, as its own routes are.
#pragma once

#include <memory>

#include "dashboard/tracker.h"
#include "dashboard/what_if.h"
#include "server/api/routes.h"
#include "service/service.h"

namespace rk::dashboard {

// `tracker`: what the dashboard reads (the same the Service feeds as its observer); `hooks`: what counts the bad
// requests; `what_if`: POST /v1/admin/simulate's bounds and time budget.
server::api::AdminRoute admin_routes(service::Service& service, std::shared_ptr<const Tracker> tracker,
                                     server::api::Hooks hooks, WhatIfLimits what_if = {});

}  // namespace rk::dashboard
