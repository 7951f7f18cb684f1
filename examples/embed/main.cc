// A few lines of C++ around rk::Limiter::check: one client sending one request a second (request #0 at t=0)
// against EARRRL at 0.5 requests a second on average (half-life 10 s). Prints the first refused request and the
// estimate it saw.
#include <ratekeeper/limiter.h>

#include <cstdio>

int main() {
  using namespace std::chrono_literals;
  auto clock = std::make_shared<rk::ManualClock>();
  rk::Limiter limiter({.algorithm = rk::Algorithm::kEarrrl, .limit = 0.5, .half_life = 10s}, {}, clock);
  for (int request = 0; request <= 100; ++request, clock->advance(1s)) {
    const rk::Decision d = limiter.check("203.0.113.7");
    if (!d.allowed) {
      std::printf("first refused: request %d, estimate %.3f/s, retry after %.1f s\n", request, *d.estimate,
                  std::chrono::duration<double>(d.retry_after).count());
      return 0;
    }
  }
  std::printf("never refused\n");
  return 1;
}
