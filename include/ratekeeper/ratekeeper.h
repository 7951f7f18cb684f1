/* ratekeeper/ratekeeper.h: the C API, for C programs and other languages' foreign-function interfaces.
 *
 *   rk_spec spec;
 *   rk_spec_init(&spec);                     // every optional parameter unset
 *   spec.algorithm = "earrrl";
 *   spec.limit = 10;                         // per window (default 1 s)
 *   spec.half_life_ns = 10000000000;         // 10 s
 *   rk_limiter* limiter;
 *   if (rk_limiter_new(&spec, &limiter) != RK_OK) fprintf(stderr, "%s\n", rk_last_error());
 *   rk_decision d;
 *   rk_limiter_check(limiter, "203.0.113.7", 11, 1, &d);
 *   if (!d.allowed) reply_429(d.retry_after_ns);
 *   rk_limiter_free(limiter);
 *
 * Every function returns RK_OK or an error code, and never lets a C++ exception out. After an error,
 * rk_last_error() describes it (naming the parameter for a bad spec); the text belongs to the calling thread and
 * stays valid until its next call into this API.
 *
 * Thread safety: one limiter may be used from many threads at once, as rk::Limiter (include/ratekeeper/limiter.h),
 * which this wraps; rk_limiter_free must not race with any other call on the same limiter.
 */
#ifndef RATEKEEPER_RATEKEEPER_H
#define RATEKEEPER_RATEKEEPER_H

#include "ratekeeper/export.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rk_status {
  RK_OK = 0,
  RK_INVALID_ARGUMENT = 1, /* a bad spec, key, cost or pointer; nothing was changed */
  RK_NO_MEMORY = 2,
  RK_INTERNAL = 3
} rk_status;

/* kNever: a retry_after_ns or reset_after_ns that will never come (a cost above what the limit can admit). */
#define RK_NEVER INT64_MAX

/* What a limit is; see include/ratekeeper/params.h for each algorithm's parameters. Optional fields are unset
 * as rk_spec_init leaves them: NaN for burst and capacity, -1 for half_life_ns and count_refused. */
typedef struct rk_spec {
  const char* algorithm;  /* earrrl, gcra, token_bucket, leaky_bucket, leaky_queue, fixed_window, sliding_log,
                             sliding_window */
  double limit;           /* requests per window */
  int64_t window_ns;      /* default 1 s */
  int64_t half_life_ns;   /* earrrl: required */
  double burst;           /* gcra, leaky_queue */
  double capacity;        /* token_bucket, leaky_bucket */
  int count_refused;      /* every algorithm: 0 or 1 (a refused charge owed as debt) */
  uint64_t max_keys;      /* the store's bound (CLOCK eviction past it); default 1,000,000 */
  uint64_t max_key_bytes; /* longer keys are refused; default 4096 */
} rk_spec;

typedef struct rk_decision {
  int allowed; /* 1 or 0 */
  double limit;
  double remaining;       /* never negative */
  int64_t retry_after_ns; /* 0 when allowed; RK_NEVER if never */
  int64_t reset_after_ns; /* until the key's state is back to fresh */
  int64_t delay_ns;       /* leaky_queue: how long an admitted request waits */
  int has_estimate;       /* earrrl: 1, and estimate is its recent rate before this attempt */
  double estimate;
} rk_decision;

typedef struct rk_stats {
  uint64_t keys;
  uint64_t evictions;
  uint64_t forgotten;
  uint64_t memory_bytes;
} rk_stats;

typedef struct rk_limiter rk_limiter;

RK_EXPORT const char* rk_version(void);
RK_EXPORT const char* rk_last_error(void);

RK_EXPORT void rk_spec_init(rk_spec* spec);

/* Checks the spec and creates a limiter on the system clock (nanoseconds since the Unix epoch). */
RK_EXPORT rk_status rk_limiter_new(const rk_spec* spec, rk_limiter** out);
RK_EXPORT void rk_limiter_free(rk_limiter* limiter); /* NULL is fine */

/* Decides one attempt of `cost` on the key (key_len bytes; any bytes) and records it. */
RK_EXPORT rk_status rk_limiter_check(rk_limiter* limiter, const char* key, size_t key_len, uint64_t cost,
                                     rk_decision* out);
/* The same at an explicit time, in nanoseconds on the caller's own clock (simulations, tests). */
RK_EXPORT rk_status rk_limiter_check_at(rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns,
                                        uint64_t cost, rk_decision* out);
/* Decides n attempts at once: key keys[i] (key_lens[i] bytes) at cost costs[i] (costs NULL: 1 each) into out[i],
 * as n calls of rk_limiter_check in order would answer (a key given twice sees its first attempt), all at one time.
 * Faster than n calls over keys not in cache: their fetches from memory overlap. On an error nothing is decided. */
RK_EXPORT rk_status rk_limiter_check_many(rk_limiter* limiter, const char* const* keys, const size_t* key_lens,
                                          const uint64_t* costs, size_t n, rk_decision* out);
RK_EXPORT rk_status rk_limiter_check_many_at(rk_limiter* limiter, const char* const* keys, const size_t* key_lens,
                                             const uint64_t* costs, size_t n, int64_t now_ns, rk_decision* out);
/* What check would answer, recording nothing. */
RK_EXPORT rk_status rk_limiter_peek(const rk_limiter* limiter, const char* key, size_t key_len, uint64_t cost,
                                    rk_decision* out);
RK_EXPORT rk_status rk_limiter_peek_at(const rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns,
                                       uint64_t cost, rk_decision* out);
/* Forgets the key; *was_tracked (may be NULL) says whether it was. */
RK_EXPORT rk_status rk_limiter_reset(rk_limiter* limiter, const char* key, size_t key_len, int* was_tracked);
/* Forgets every key whose state is back to fresh at now_ns; *forgotten (may be NULL) counts them. */
RK_EXPORT rk_status rk_limiter_sweep_at(rk_limiter* limiter, int64_t now_ns, uint64_t* forgotten);
RK_EXPORT rk_status rk_limiter_stats(const rk_limiter* limiter, rk_stats* out);

/* Reserve and settle (include/ratekeeper/limiter.h): a cost estimated before and known after, such as an AI
 * gateway's tokens. rk_limiter_reserve charges the estimate as a check does when it fits, and fills id (32
 * hex digits and a NUL: 128 random bits) with the reservation it holds for ttl_ns (0: 60 s; 1 ms .. 24 h); refused,
 * it charges nothing (whatever count_refused says) and id is "". rk_limiter_settle charges actual - estimate more
 * (recorded even past what is left: a bounded debt) or gives estimate - actual back (never more than the reservation
 * took); out is the key after it. An unknown, expired, settled or another key's id sets *settled to 0 and changes
 * nothing. An estimate or actual above 2^53 is RK_INVALID_ARGUMENT naming it, and decides nothing.
 *
 *   char id[RK_RESERVATION_ID_SIZE];
 *   rk_decision d;
 *   rk_limiter_reserve(l, "user:42", 7, 500, 0, id, &d);
 *   if (d.allowed) { uint64_t used = call_the_model(); rk_limiter_settle(l, "user:42", 7, id, used, NULL, &d); }
 */
#define RK_RESERVATION_ID_SIZE 33
RK_EXPORT rk_status rk_limiter_reserve(rk_limiter* limiter, const char* key, size_t key_len, uint64_t estimate,
                                       int64_t ttl_ns, char id[RK_RESERVATION_ID_SIZE], rk_decision* out);
RK_EXPORT rk_status rk_limiter_reserve_at(rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns,
                                          uint64_t estimate, int64_t ttl_ns, char id[RK_RESERVATION_ID_SIZE],
                                          rk_decision* out);
/* *settled (may be NULL): 1 if the reservation was held, else 0 (nothing changed; out untouched). */
RK_EXPORT rk_status rk_limiter_settle(rk_limiter* limiter, const char* key, size_t key_len, const char* id,
                                      uint64_t actual, int* settled, rk_decision* out);
RK_EXPORT rk_status rk_limiter_settle_at(rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns,
                                         const char* id, uint64_t actual, int* settled, rk_decision* out);

/* Checks a spec without making anything: RK_OK, or RK_INVALID_ARGUMENT with rk_last_error() naming the problem. */
RK_EXPORT rk_status rk_spec_check(const rk_spec* spec);

/* A limit shared by the processes of one host through shared memory (include/ratekeeper/shared.h): the region
 * is memory the caller has mapped shared, such as an nginx shared zone. spec->max_keys and spec->max_key_bytes size
 * it; `format` it once (in the process that maps it first), then attach to it. Attaching checks the region's
 * header (RK_INVALID_ARGUMENT naming the field); a region found corrupted in use (an index out of range, a looped
 * chain) gives RK_INTERNAL from rk_shared_check*, rk_last_error() naming the shard and the damage: the shard's
 * lock is released and other shards still work (docs/security.md, "Shared memory"). */
typedef struct rk_shared rk_shared;

RK_EXPORT size_t rk_shared_region_bytes(uint64_t max_keys, uint64_t max_key_bytes, uint64_t shards);
RK_EXPORT uint64_t rk_shared_keys_that_fit(size_t bytes, uint64_t max_key_bytes, uint64_t shards);
RK_EXPORT rk_status rk_shared_in_region(void* base, size_t bytes, int format, const rk_spec* spec, uint64_t shards,
                                        rk_shared** out);
RK_EXPORT void rk_shared_free(rk_shared* shared); /* the handle only: the region stays as it is */
RK_EXPORT rk_status rk_shared_check(rk_shared* shared, const char* key, size_t key_len, uint64_t cost,
                                    rk_decision* out);
RK_EXPORT rk_status rk_shared_check_at(rk_shared* shared, const char* key, size_t key_len, int64_t now_ns,
                                       uint64_t cost, rk_decision* out);
RK_EXPORT rk_status rk_shared_peek_at(const rk_shared* shared, const char* key, size_t key_len, int64_t now_ns,
                                      uint64_t cost, rk_decision* out);
RK_EXPORT rk_status rk_shared_stats(const rk_shared* shared, rk_stats* out); /* memory_bytes: the region's size */

/* The rate-limit HTTP header fields for an answer, formatted as ratekeeper's service formats them (one formatter;
 * docs/service.md, "Rate-limit header fields"): RateLimit-Policy (every limit), RateLimit, X-RateLimit-Limit,
 * -Remaining and -Reset (the binding limit: the refusing one with the longest wait, else the one with the least
 * left), and Retry-After when the binding limit refuses.
 *
 *   rk_header_limit l = { "api", 3, spec.limit, spec.window_ns, decision };
 *   size_t bytes = rk_headers_bytes(&l, 1), n;
 *   char* buf = malloc(bytes);
 *   rk_header_field fields[RK_HEADER_FIELDS_MAX];
 *   if (rk_format_headers(&l, 1, buf, bytes, fields, &n) == RK_OK)
 *     for (size_t i = 0; i < n; i++) add_header(fields[i].name, fields[i].value, fields[i].value_len);
 */
typedef struct rk_header_limit {
  const char* name; /* the policy's name (name_len bytes; written as a quoted Structured Fields string) */
  size_t name_len;
  double quota;         /* the limit per window as configured (rk_spec.limit) */
  int64_t window_ns;    /* rk_spec.window_ns */
  rk_decision decision; /* as applied: a dry run lets a refused request through, so pass it with allowed = 1 */
} rk_header_limit;

typedef struct rk_header_field {
  const char* name;  /* NUL-terminated, static */
  const char* value; /* value_len bytes in the caller's buffer, not NUL-terminated */
  size_t value_len;
} rk_header_field;

#define RK_HEADER_FIELDS_MAX 6

/* A buffer of this many bytes always holds rk_format_headers's values for these limits. */
RK_EXPORT size_t rk_headers_bytes(const rk_header_limit* limits, size_t n_limits);
/* Fills fields[0 .. *n_fields) (room for RK_HEADER_FIELDS_MAX), their values written into buf. No limits: no
 * fields. RK_INVALID_ARGUMENT for a NULL pointer or a buf shorter than the values need. */
RK_EXPORT rk_status rk_format_headers(const rk_header_limit* limits, size_t n_limits, char* buf, size_t buf_len,
                                      rk_header_field* fields, size_t* n_fields);

/* A key longer than a store's slot, said in RK_KEY_DIGEST_BYTES bytes: SipHash-2-4-128 keyed with a secret seed of
 * RK_KEY_DIGEST_BYTES, so two keys with one digest cannot be found without the seed. Keep the seed as long as the
 * state the digests name (a new seed names every long key afresh). */
#define RK_KEY_DIGEST_BYTES 16
/* A fresh seed from the operating system's random source. */
RK_EXPORT rk_status rk_key_digest_seed(uint8_t seed[RK_KEY_DIGEST_BYTES]);
RK_EXPORT rk_status rk_key_digest(const uint8_t seed[RK_KEY_DIGEST_BYTES], const char* key, size_t key_len,
                                  uint8_t out[RK_KEY_DIGEST_BYTES]);

/* The `concurrency` algorithm (include/ratekeeper/concurrency.h): at most max_in_flight leases of a key at once,
 * each held until released or until lease_ttl_ns has passed.
 *
 *   rk_concurrency* c;
 *   rk_concurrency_new(10, 30000000000, &c);      // 10 at once, leases expire after 30 s
 *   char id[RK_LEASE_ID_SIZE];
 *   int acquired;
 *   rk_concurrency_acquire(c, "user:42", 7, id, &acquired, NULL);
 *   if (acquired) { serve(); rk_concurrency_release(c, "user:42", 7, id, NULL); }
 *
 * A lease id is 32 hex digits and a NUL (128 random bits): only whoever was given it can release the lease.
 * Releasing an unknown, expired or released id sets *released to 0 and changes nothing. */
typedef struct rk_concurrency rk_concurrency;
#define RK_LEASE_ID_SIZE 33

/* lease_ttl_ns 0: the default (60 s). RK_INVALID_ARGUMENT naming max_in_flight or lease_ttl when out of range. */
RK_EXPORT rk_status rk_concurrency_new(uint32_t max_in_flight, int64_t lease_ttl_ns, rk_concurrency** out);
RK_EXPORT void rk_concurrency_free(rk_concurrency* c); /* NULL is fine; the caller releases no lease after it */
/* *acquired: 1 and lease_id filled, or 0 and *retry_after_ns (may be NULL) until the first held lease expires. */
RK_EXPORT rk_status rk_concurrency_acquire(rk_concurrency* c, const char* key, size_t key_len,
                                           char lease_id[RK_LEASE_ID_SIZE], int* acquired, int64_t* retry_after_ns);
RK_EXPORT rk_status rk_concurrency_acquire_at(rk_concurrency* c, const char* key, size_t key_len, int64_t now_ns,
                                              char lease_id[RK_LEASE_ID_SIZE], int* acquired, int64_t* retry_after_ns);
/* *released (may be NULL): 1 if the lease was held, else 0 (nothing changed). */
RK_EXPORT rk_status rk_concurrency_release(rk_concurrency* c, const char* key, size_t key_len, const char* lease_id,
                                           int* released);
RK_EXPORT rk_status rk_concurrency_release_at(rk_concurrency* c, const char* key, size_t key_len, const char* lease_id,
                                              int64_t now_ns, int* released);
RK_EXPORT rk_status rk_concurrency_in_flight(const rk_concurrency* c, const char* key, size_t key_len, uint32_t* out);

/* The `concurrency` algorithm in shared memory (rk::SharedConcurrencyLimiter, include/ratekeeper/shared.h): the
 * leases of every process that maps the region, such as the workers of one nginx, in a region sized as for
 * rk_shared_in_region (max_keys keys of up to max_key_bytes bytes, each holding up to max_in_flight leases, at most
 * RK_SHARED_MAX_IN_FLIGHT). A key holds a slot only while it has leases; a new key when every slot's key holds an
 * unexpired lease is refused (*retry_after_ns: the lease's time to live). Acquire, release and in_flight answer
 * as rk_concurrency's do; a process that dies holding leases leaves them to expire after lease_ttl_ns (0: 60 s).
 *
 *   rk_shared_concurrency* c;
 *   rk_shared_concurrency_in_region(zone, bytes, 1, 10, 30000000000, max_keys, 64, 16, &c);
 *   rk_shared_concurrency_acquire(c, "user:42", 7, id, &acquired, &retry_after_ns);
 *   if (acquired) { serve(); rk_shared_concurrency_release(c, "user:42", 7, id, NULL); }
 */
typedef struct rk_shared_concurrency rk_shared_concurrency;
#define RK_SHARED_MAX_IN_FLIGHT 4096

/* 0 for a parameter out of range. */
RK_EXPORT size_t rk_shared_concurrency_region_bytes(uint32_t max_in_flight, uint64_t max_keys, uint64_t max_key_bytes,
                                                    uint64_t shards);
RK_EXPORT uint64_t rk_shared_concurrency_keys_that_fit(size_t bytes, uint32_t max_in_flight, uint64_t max_key_bytes,
                                                       uint64_t shards);
RK_EXPORT rk_status rk_shared_concurrency_in_region(void* base, size_t bytes, int format, uint32_t max_in_flight,
                                                    int64_t lease_ttl_ns, uint64_t max_keys, uint64_t max_key_bytes,
                                                    uint64_t shards, rk_shared_concurrency** out);
RK_EXPORT void rk_shared_concurrency_free(rk_shared_concurrency* c); /* the handle only: the leases stay */
RK_EXPORT rk_status rk_shared_concurrency_acquire(rk_shared_concurrency* c, const char* key, size_t key_len,
                                                  char lease_id[RK_LEASE_ID_SIZE], int* acquired,
                                                  int64_t* retry_after_ns);
RK_EXPORT rk_status rk_shared_concurrency_acquire_at(rk_shared_concurrency* c, const char* key, size_t key_len,
                                                     int64_t now_ns, char lease_id[RK_LEASE_ID_SIZE], int* acquired,
                                                     int64_t* retry_after_ns);
RK_EXPORT rk_status rk_shared_concurrency_release(rk_shared_concurrency* c, const char* key, size_t key_len,
                                                  const char* lease_id, int* released);
RK_EXPORT rk_status rk_shared_concurrency_release_at(rk_shared_concurrency* c, const char* key, size_t key_len,
                                                     const char* lease_id, int64_t now_ns, int* released);
RK_EXPORT rk_status rk_shared_concurrency_in_flight(const rk_shared_concurrency* c, const char* key, size_t key_len,
                                                    uint32_t* out);

#ifdef __cplusplus
}
#endif

#endif /* RATEKEEPER_RATEKEEPER_H */
