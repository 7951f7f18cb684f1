// yaml/read_params.h: an algorithm's optional parameters (core/registry.h: half_life, burst, capacity, count_refused,
// align) read into a LimitSpec with each one's type, as rules files and scenarios both write them.
//
//   for (core::Param p : core::kAllParams) {
//     const std::string key(core::param_name(p));
//     if (n[key]) rk::yaml::read_param(reader, n[key], "limiter." + key, p, spec);
//   }
//
// Which parameters a document may give, and which an algorithm takes, is for the caller and for validate().
#pragma once

#include <string>

#include "core/registry.h"
#include "yaml/reader.h"

namespace rk::yaml {

// Sets spec's field for `p` from `n`: half_life a duration, burst and capacity numbers, count_refused a boolean
// (unset when `n` is not one, with a problem), align `epoch` or `calendar` (left as it was when neither).
void read_param(Reader& r, const YAML::Node& n, const std::string& where, core::Param p, LimitSpec& spec);

}  // namespace rk::yaml
