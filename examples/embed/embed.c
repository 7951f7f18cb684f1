/* The C API: a token bucket of 3, refilled at 1 a second; five requests at once. */
#include <ratekeeper/ratekeeper.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  rk_spec spec;
  rk_spec_init(&spec);
  spec.algorithm = "token_bucket";
  spec.limit = 1;
  spec.capacity = 3;
  rk_limiter* limiter;
  if (rk_limiter_new(&spec, &limiter) != RK_OK) {
    fprintf(stderr, "%s\n", rk_last_error());
    return 1;
  }
  const char* key = "api-key-42";
  for (int i = 1; i <= 5; ++i) {
    rk_decision d;
    if (rk_limiter_check_at(limiter, key, strlen(key), 0, 1, &d) != RK_OK) {
      fprintf(stderr, "%s\n", rk_last_error());
      return 1;
    }
    printf("request %d: %s, remaining %g, retry after %.3f s\n", i, d.allowed ? "allowed" : "refused", d.remaining,
           (double)d.retry_after_ns / 1e9);
  }
  spec.limit = -1;
  rk_limiter* bad;
  printf("a limit of -1: %s\n", rk_limiter_new(&spec, &bad) == RK_INVALID_ARGUMENT ? rk_last_error() : "accepted?");
  rk_limiter_free(limiter);
  return 0;
}
