// tests/differential/cases.h: random limits and random traces for the differential test, each made from one seed,
// so that a case found by one run can be made again by another.
//
//   const Case c = make_case(seed);  // a valid LimitSpec and the steps to run on it
//   std::cerr << describe(c.spec) << describe_steps(c, upto);
//
// The generator aims at the edges: windows from 1 ms to a year, calendar-aligned fixed windows, windows that are
// not a whole number of microseconds, costs from 0 to above the limit, clocks that step back, and times at window
// and calendar boundaries (month ends, Feb 29) and at the instants a previous decision named (retry_after,
// reset_after), give or take a nanosecond.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk::diff {

struct Step {
  // A check (or a peek); a reserve of `cost` held ttl_ns; a settle of one of the case's reserves.
  enum class Op : std::uint8_t { kCheck, kReserve, kSettle };
  Op op = Op::kCheck;
  int key = 0;            // which of the case's keys
  std::int64_t t_ns = 0;  // the caller's time: mostly rising, sometimes back
  std::uint64_t cost = 1;
  bool peek = false;
  std::int64_t ttl_ns = 0;  // reserve: how long it is held (1 s and up: Redis expires the record by its own clock too)
  int reservation = -1;     // settle: which of the case's reserves, 0 the latest (refused ones count); -1 an unknown id
  std::int64_t delta = 0;   // settle: the actual is the reserve's estimate + delta, at least 0
  // Where the generator aimed (for reading a failure): "gap", "boundary+1", "retry_after-1", "back", ...
  std::string aim;
};

// The steps are made against the reference store as they go (a step may aim at the retry_after the previous
// decision gave), so a Case holds only the spec and the seed; run_steps() makes the steps.
struct Case {
  std::uint64_t seed = 0;
  LimitSpec spec;
  int keys = 1;
  int steps = 0;
  bool reservations = false;  // whether its trace reserves and settles too
};

Case make_case(std::uint64_t seed);

// The next step, given the previous ones and the reference decision for the previous step (if any). Deterministic
// in (case, index, the decisions so far), which are themselves deterministic in the seed.
class TraceMaker {
 public:
  explicit TraceMaker(const Case& c);
  Step next(const Decision* previous);

 private:
  const Case& case_;
  std::uint64_t rng_state_;
  std::vector<std::int64_t> latest_;  // per key
  std::int64_t now_ = 0;
  Step last_{};
  bool started_ = false;
  struct Reserved {
    int key;
    std::int64_t t_ns, ttl_ns;
  };
  std::vector<Reserved> reserved_;  // every reserve step so far

  std::uint64_t rand();
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rand() % n; }
  std::int64_t next_time(const Decision* previous, std::string& aim);
  std::uint64_t next_cost();
  void reserve_or_settle(Step& s);
};

// The first window boundary after t: a multiple of the window, or a calendar week, month or year start (UTC).
std::int64_t next_boundary(const LimitSpec& spec, std::int64_t t);

std::string describe(const LimitSpec& spec);
std::string describe(const Step& s);
std::string describe(const Decision& d);

}  // namespace rk::diff
