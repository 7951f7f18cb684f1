// yaml/read_params.cc: an algorithm's optional parameters read from YAML (yaml/read_params.h).
#include "yaml/read_params.h"

namespace rk::yaml {

void read_param(Reader& r, const YAML::Node& n, const std::string& where, core::Param p, LimitSpec& spec) {
  switch (p) {
    case core::Param::kHalfLife: spec.half_life = r.duration(n, where); return;
    case core::Param::kBurst: spec.burst = r.number(n, where); return;
    case core::Param::kCapacity: spec.capacity = r.number(n, where); return;
    case core::Param::kCountRefused: spec.count_refused = r.boolean(n, where); return;
    case core::Param::kAlign:
      if (auto s = r.string(n, where)) {
        if (*s == "calendar") spec.align = Align::kCalendar;
        else if (*s == "epoch") spec.align = Align::kEpoch;
        else r.fail(n, where + ": '" + *s + "' is not an alignment (epoch, calendar)");
      }
      return;
  }
}

}  // namespace rk::yaml
