// cli/serve/settings.h: a settings file (`serve --settings FILE`): serve's flags as a YAML mapping, named without
// their dashes, each setting read by the same checks as its flag.
//
//   # /etc/ratekeeper/settings.yaml
//   redis: redis://127.0.0.1:6379
//   redis-timeout: 50ms
//   shadow-mode: true
//
// Every problem is reported, each with the file, line and column, and the setting named as written:
//   settings.yaml:2:16: redis-timeout: 'forever' is not a duration from 1ms to 60s
//   settings.yaml:3:1: unknown setting 'colour'
#pragma once

#include <string>
#include <vector>

#include "cli/serve/flags.h"

namespace rk::cli::serve {

// Applies the file's settings to `f`, in the file's order. Returns every problem (none: all applied).
std::vector<std::string> apply_settings(const std::string& path, ServeFlags& f);

}  // namespace rk::cli::serve
