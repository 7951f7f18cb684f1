/*
 * ngx_http_ratekeeper_module: ratekeeper's limiters inside nginx, with no network hop. State lives in an nginx
 * shared zone, shared by every worker, through ratekeeper's shared-memory store (include/ratekeeper/shared.h).
 *
 *   ratekeeper_zone zone=api:10m algorithm=earrrl rate=10r/s half_life=10s;
 *   ratekeeper_zone zone=login:1m algorithm=gcra rate=5r/m burst=4 key_size=16;
 *   ratekeeper_zone zone=conn:1m algorithm=concurrency max_in_flight=10 lease_ttl=60s;
 *
 *   location /api/ {
 *       ratekeeper zone=api key=$binary_remote_addr;
 *       ratekeeper zone=login key=$http_x_api_key cost=2;
 *       ratekeeper zone=conn key=$binary_remote_addr;   # at most 10 in flight
 *       ratekeeper_status 429;        # default 429
 *       ratekeeper_dry_run off;       # on: decide and log, refuse nothing
 *       ratekeeper_headers on;        # RateLimit-Policy, RateLimit, X-RateLimit-*, Retry-After
 *   }
 *   log_format rl '$remote_addr $status $ratekeeper_decision';
 *
 * Every algorithm of ratekeeper but sliding_log is available; see docs/nginx.md. leaky_queue's admitted requests
 * wait their delay before going on, as limit_req's queue without nodelay (not in a dry run). A concurrency zone's
 * lease (rk_shared_concurrency_*) is taken in the preaccess phase and given back when the request's pool is
 * destroyed (a pool cleanup: every request ends so, aborted by its client or redirected internally), or at once
 * when the request is refused; a worker killed while holding leases leaves them to expire after lease_ttl.
 * The header fields are the library's (rk_format_headers), the same as ratekeeper serve's. A key longer than
 * key_size is limited under its keyed digest (rk_key_digest, with a seed per zone), so long API keys are limited
 * as short ones are.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdlib.h>

#include <ratekeeper/ratekeeper.h>

#define RK_SHARDS 16

typedef struct {
    rk_spec      spec;
    u_char       algorithm[32];    /* spec.algorithm points here */
    ngx_str_t    name;
    ngx_flag_t   concurrency;      /* algorithm=concurrency: leases, not rates */
    uint32_t     max_in_flight;
    int64_t      lease_ttl_ns;
    rk_shared   *shared;           /* this process's handle on the zone's region: a rate zone's */
    rk_shared_concurrency *leases; /* a concurrency zone's */
    void        *region;           /* in the zone; kept across reloads */
    size_t       region_bytes;
    uint8_t      digest_seed[RK_KEY_DIGEST_BYTES];  /* secret; kept across reloads with the region */
} ngx_http_rk_zone_t;

typedef struct {
    ngx_shm_zone_t           *shm_zone;
    ngx_http_complex_value_t  key;
    ngx_uint_t                cost;
    ngx_flag_t                cost_given;  /* a concurrency zone takes none */
} ngx_http_rk_limit_t;

typedef struct {
    ngx_array_t  *limits;          /* of ngx_http_rk_limit_t, or NULL */
    ngx_uint_t    status;
    ngx_flag_t    dry_run;
    ngx_flag_t    headers;
} ngx_http_rk_loc_conf_t;

enum { RK_NONE = 0, RK_ALLOWED, RK_REFUSED, RK_DRY_RUN };

/* A lease this request holds on a concurrency zone, given back when the request ends. */
typedef struct {
    ngx_http_rk_zone_t  *zone;
    ngx_str_t            key;      /* in the request's pool, which outlives the lease */
    char                 id[RK_LEASE_ID_SIZE];
} ngx_http_rk_lease_t;

typedef struct {
    ngx_uint_t           outcome;
    ngx_http_rk_zone_t  *refusing; /* the first zone that refused, for the log */
    rk_header_limit     *limits;   /* each applied rate limit's decision, as applied (a dry run's refusal: allowed) */
    ngx_uint_t           nlimits;
    ngx_http_rk_lease_t *leases;   /* held until the request ends */
    ngx_uint_t           nleases;
    int64_t              lease_retry_after_ns;  /* a concurrency zone's refusal: until its first lease expires */
    ngx_log_t           *log;
} ngx_http_rk_ctx_t;

static ngx_int_t ngx_http_rk_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_rk_init(ngx_conf_t *cf);
static void *ngx_http_rk_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_rk_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_rk_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_rk_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_rk_add_zone(ngx_conf_t *cf, ngx_http_rk_zone_t *zone, ssize_t size);

static ngx_conf_num_bounds_t ngx_http_rk_status_bounds = { ngx_conf_check_num_bounds, 400, 599 };

static ngx_command_t ngx_http_rk_commands[] = {
    { ngx_string("ratekeeper_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, ngx_http_rk_zone, 0, 0, NULL },
    { ngx_string("ratekeeper"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE23,
      ngx_http_rk_limit, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("ratekeeper_status"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(ngx_http_rk_loc_conf_t, status),
      &ngx_http_rk_status_bounds },
    { ngx_string("ratekeeper_dry_run"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(ngx_http_rk_loc_conf_t, dry_run), NULL },
    { ngx_string("ratekeeper_headers"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(ngx_http_rk_loc_conf_t, headers), NULL },
    ngx_null_command
};

static ngx_http_module_t ngx_http_rk_module_ctx = {
    ngx_http_rk_add_variables, ngx_http_rk_init, NULL, NULL, NULL, NULL,
    ngx_http_rk_create_loc_conf, ngx_http_rk_merge_loc_conf
};

ngx_module_t ngx_http_ratekeeper_module = {
    NGX_MODULE_V1, &ngx_http_rk_module_ctx, ngx_http_rk_commands, NGX_HTTP_MODULE,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NGX_MODULE_V1_PADDING
};

static ngx_http_output_header_filter_pt ngx_http_next_header_filter;

/* The library's header fields (the same as ratekeeper serve's) for the request's applied limits. */
static ngx_int_t
ngx_http_rk_add_headers(ngx_http_request_t *r, ngx_http_rk_ctx_t *ctx)
{
    rk_header_field   fields[RK_HEADER_FIELDS_MAX];
    size_t            bytes = rk_headers_bytes(ctx->limits, ctx->nlimits), n, i;
    u_char           *buf = ngx_pnalloc(r->pool, bytes);
    ngx_table_elt_t  *h;

    if (buf == NULL) {
        return NGX_ERROR;
    }
    if (rk_format_headers(ctx->limits, ctx->nlimits, (char *) buf, bytes, fields, &n) != RK_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "ratekeeper: header fields: %s", rk_last_error());
        return NGX_ERROR;
    }
    for (i = 0; i < n; i++) {
        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_ERROR;
        }
        h->hash = 1;
        h->key.data = (u_char *) fields[i].name;
        h->key.len = ngx_strlen(fields[i].name);
        h->value.data = (u_char *) fields[i].value;
        h->value.len = fields[i].value_len;
    }
    return NGX_OK;
}

/* Gives back the request's leases. */
static void
ngx_http_rk_release_leases(ngx_http_rk_ctx_t *ctx)
{
    ngx_http_rk_lease_t  *l;
    ngx_uint_t            i;

    for (i = 0; i < ctx->nleases; i++) {
        l = &ctx->leases[i];
        if (l->zone->leases != NULL
            && rk_shared_concurrency_release(l->zone->leases, (const char *) l->key.data, l->key.len, l->id, NULL)
               != RK_OK)
        {
            ngx_log_error(NGX_LOG_ERR, ctx->log, 0, "ratekeeper: zone \"%V\": %s", &l->zone->name, rk_last_error());
        }
    }
    ctx->nleases = 0;
}

/* An internal redirect (index, try_files, error_page) clears the modules' request contexts, but the request's
 * decision must be made once: the context is also kept as the data of a pool cleanup, which survives. The cleanup
 * runs when the request's pool is destroyed, however the request ended (answered, aborted by its client, finalized
 * with an error): there the request's leases are given back. */
static void
ngx_http_rk_ctx_marker(void *data)
{
    ngx_http_rk_release_leases(data);
}

static ngx_http_rk_ctx_t *
ngx_http_rk_get_ctx(ngx_http_request_t *r)
{
    ngx_http_rk_ctx_t   *ctx = ngx_http_get_module_ctx(r, ngx_http_ratekeeper_module);
    ngx_pool_cleanup_t  *cln;

    if (ctx != NULL) {
        return ctx;
    }
    for (cln = r->pool->cleanup; cln != NULL; cln = cln->next) {
        if (cln->handler == ngx_http_rk_ctx_marker) {
            ctx = cln->data;
            ngx_http_set_ctx(r, ctx, ngx_http_ratekeeper_module);
            return ctx;
        }
    }
    return NULL;
}

/* The key as the zone stores it: itself, or its keyed digest when longer than the zone's key_size. Digests are
 * RK_KEY_DIGEST_BYTES bytes, which every zone's slots hold (key_size is at least that), and keyed by the zone's
 * secret seed, so no client can pick a long key that shares another key's count. */
static ngx_int_t
ngx_http_rk_stored_key(ngx_http_request_t *r, ngx_http_rk_zone_t *zone, ngx_str_t *key)
{
    u_char  *digest;

    if (key->len <= zone->spec.max_key_bytes) {
        return NGX_OK;
    }
    digest = ngx_pnalloc(r->pool, RK_KEY_DIGEST_BYTES);
    if (digest == NULL) {
        return NGX_ERROR;
    }
    if (rk_key_digest(zone->digest_seed, (const char *) key->data, key->len, digest) != RK_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "ratekeeper: zone \"%V\": %s", &zone->name,
                      rk_last_error());
        return NGX_ERROR;
    }
    key->data = digest;
    key->len = RK_KEY_DIGEST_BYTES;
    return NGX_OK;
}

/* After its delay, the request goes on through the phases; this module's handler declines it then (decided). */
static void
ngx_http_rk_delayed(ngx_http_request_t *r)
{
    ngx_event_t  *wev = r->connection->write;

    if (wev->delayed) {  /* a write event before the timer: keep waiting */
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }
        return;
    }
    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}

/* leaky_queue admits a request with a delay: the time the queue lets it out at its rate. The request waits that long
 * (the longest of its zones'), as limit_req's queue does without nodelay, instead of passing at once as gcra would;
 * a client that goes away meanwhile is noticed (ngx_http_test_reading). A dry run waits for nothing. */
static ngx_int_t
ngx_http_rk_wait(ngx_http_request_t *r, ngx_http_rk_ctx_t *ctx)
{
    int64_t     delay_ns = 0;
    ngx_uint_t  i;

    for (i = 0; i < ctx->nlimits; i++) {
        delay_ns = ngx_max(delay_ns, ctx->limits[i].decision.delay_ns);
    }
    if (delay_ns <= 0) {
        return NGX_DECLINED;
    }
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_rk_delayed;
    r->connection->write->delayed = 1;
    ngx_add_timer(r->connection->write, (ngx_msec_t) ((delay_ns + 999999) / 1000000));
    return NGX_AGAIN;
}

/* Takes a lease on a concurrency zone: NGX_OK held (until the request ends), NGX_DECLINED refused (every slot
 * held), NGX_ERROR (logged: the limit does not apply). */
static ngx_int_t
ngx_http_rk_acquire(ngx_http_request_t *r, ngx_http_rk_ctx_t *ctx, ngx_http_rk_zone_t *zone, ngx_str_t *key)
{
    ngx_http_rk_lease_t  *l = &ctx->leases[ctx->nleases];
    int                   acquired = 0;
    int64_t               retry_after_ns = 0;

    l->key.data = ngx_pnalloc(r->pool, key->len + 1);  /* the key's value may live in the connection's pool */
    if (l->key.data == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(l->key.data, key->data, key->len);
    l->key.len = key->len;
    if (rk_shared_concurrency_acquire(zone->leases, (const char *) l->key.data, l->key.len, l->id, &acquired,
                                      &retry_after_ns) != RK_OK)
    {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "ratekeeper: zone \"%V\": %s", &zone->name,
                      rk_last_error());
        return NGX_ERROR;
    }
    if (!acquired) {
        ctx->lease_retry_after_ns = ngx_max(ctx->lease_retry_after_ns, retry_after_ns);
        return NGX_DECLINED;
    }
    l->zone = zone;
    ctx->nleases++;
    return NGX_OK;
}

/* A concurrency zone's refusal says when to come back: when its first lease expires (a release may come sooner),
 * in whole seconds, at least 1, as ratekeeper serve's /v1/acquire says it. Unless a rate limit's fields say it. */
static ngx_int_t
ngx_http_rk_lease_retry_after(ngx_http_request_t *r, ngx_http_rk_ctx_t *ctx)
{
    ngx_table_elt_t  *h;
    ngx_uint_t        i;
    int64_t           secs = (ctx->lease_retry_after_ns + 999999999) / 1000000000;

    for (i = 0; i < ctx->nlimits; i++) {
        if (!ctx->limits[i].decision.allowed) {
            return NGX_OK;  /* the rate limits' fields have their Retry-After */
        }
    }
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    h->value.data = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (h->value.data == NULL) {
        return NGX_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "Retry-After");
    h->value.len = ngx_sprintf(h->value.data, "%L", ngx_max(secs, 1)) - h->value.data;
    return NGX_OK;
}

static ngx_int_t
ngx_http_rk_handler(ngx_http_request_t *r)
{
    ngx_http_rk_loc_conf_t  *lcf = ngx_http_get_module_loc_conf(r, ngx_http_ratekeeper_module);
    ngx_http_rk_limit_t     *limits;
    ngx_http_rk_ctx_t       *ctx;
    ngx_http_rk_zone_t      *zone;
    ngx_pool_cleanup_t      *cln;
    rk_header_limit         *l;
    ngx_uint_t               i, applied = 0;
    ngx_int_t                rc;
    ngx_str_t                key;

    if (lcf->limits == NULL || r != r->main) {
        return NGX_DECLINED;
    }
    if (ngx_http_rk_get_ctx(r) != NULL) {
        return NGX_DECLINED;  /* decided once per request, not again after an internal redirect */
    }
    cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_http_rk_ctx_t));
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx = cln->data;
    ngx_memzero(ctx, sizeof(ngx_http_rk_ctx_t));
    cln->handler = ngx_http_rk_ctx_marker;
    ngx_http_set_ctx(r, ctx, ngx_http_ratekeeper_module);
    ctx->log = r->connection->log;
    ctx->limits = ngx_pcalloc(r->pool, lcf->limits->nelts * sizeof(rk_header_limit));
    ctx->leases = ngx_pcalloc(r->pool, lcf->limits->nelts * sizeof(ngx_http_rk_lease_t));
    if (ctx->limits == NULL || ctx->leases == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    limits = lcf->limits->elts;
    for (i = 0; i < lcf->limits->nelts; i++) {
        if (ngx_http_complex_value(r, &limits[i].key, &key) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (key.len == 0) {
            continue;  /* no key, no limit: as limit_req does */
        }
        zone = limits[i].shm_zone->data;
        if (ngx_http_rk_stored_key(r, zone, &key) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (zone->concurrency) {
            rc = ngx_http_rk_acquire(r, ctx, zone, &key);
            if (rc == NGX_ERROR) {
                continue;
            }
            applied++;
            if (rc == NGX_DECLINED && ctx->refusing == NULL) {
                ctx->refusing = zone;
            }
            continue;
        }
        l = &ctx->limits[ctx->nlimits];
        if (rk_shared_check(zone->shared, (const char *) key.data, key.len, limits[i].cost, &l->decision) != RK_OK) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "ratekeeper: zone \"%V\": %s", &zone->name,
                          rk_last_error());
            continue;
        }
        l->name = (const char *) zone->name.data;
        l->name_len = zone->name.len;
        l->quota = zone->spec.limit;
        l->window_ns = zone->spec.window_ns;
        ctx->nlimits++;
        applied++;
        if (!l->decision.allowed && ctx->refusing == NULL) {
            ctx->refusing = zone;
        }
    }
    if (applied == 0) {
        return NGX_DECLINED;
    }
    if (ctx->refusing == NULL) {
        ctx->outcome = RK_ALLOWED;
        return lcf->dry_run ? NGX_DECLINED : ngx_http_rk_wait(r, ctx);
    }
    if (lcf->dry_run) {
        ctx->outcome = RK_DRY_RUN;
        for (i = 0; i < ctx->nlimits; i++) {
            ctx->limits[i].decision.allowed = 1;  /* as applied: the request goes through */
        }
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "ratekeeper: dry run: zone \"%V\" would refuse",
                      &ctx->refusing->name);
        return NGX_DECLINED;
    }
    ctx->outcome = RK_REFUSED;
    ngx_http_rk_release_leases(ctx);  /* a refused request holds no slot while its refusal is sent */
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0, "ratekeeper: zone \"%V\" refused", &ctx->refusing->name);
    if (lcf->headers && ctx->nlimits > 0 && ngx_http_rk_add_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (lcf->headers && ctx->refusing->concurrency && ngx_http_rk_lease_retry_after(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return lcf->status;
}

/* On admitted requests, the RateLimit fields go on whatever response the location makes. */
static ngx_int_t
ngx_http_rk_header_filter(ngx_http_request_t *r)
{
    ngx_http_rk_ctx_t       *ctx = r == r->main ? ngx_http_rk_get_ctx(r) : NULL;
    ngx_http_rk_loc_conf_t  *lcf;

    if (ctx != NULL && ctx->outcome != RK_NONE && ctx->outcome != RK_REFUSED && ctx->nlimits > 0 && r == r->main) {
        lcf = ngx_http_get_module_loc_conf(r, ngx_http_ratekeeper_module);
        if (lcf->headers && ngx_http_rk_add_headers(r, ctx) != NGX_OK) {
            return NGX_ERROR;
        }
    }
    return ngx_http_next_header_filter(r);
}

static ngx_int_t
ngx_http_rk_decision_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data)
{
    static const char *names[] = { "", "allowed", "refused", "dry_run" };
    ngx_http_rk_ctx_t  *ctx = ngx_http_rk_get_ctx(r->main);
    const char         *name = names[ctx ? ctx->outcome : RK_NONE];

    (void) data;
    v->data = (u_char *) name;
    v->len = ngx_strlen(name);
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

static ngx_int_t
ngx_http_rk_add_variables(ngx_conf_t *cf)
{
    ngx_str_t             name = ngx_string("ratekeeper_decision");
    ngx_http_variable_t  *var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);

    if (var == NULL) {
        return NGX_ERROR;
    }
    var->get_handler = ngx_http_rk_decision_variable;
    return NGX_OK;
}

/* The most keys of the zone's kind that fit in `bytes`, and the bytes that many take. */
static uint64_t
ngx_http_rk_keys_that_fit(ngx_http_rk_zone_t *zone, size_t bytes)
{
    if (zone->concurrency) {
        return rk_shared_concurrency_keys_that_fit(bytes, zone->max_in_flight, zone->spec.max_key_bytes, RK_SHARDS);
    }
    return rk_shared_keys_that_fit(bytes, zone->spec.max_key_bytes, RK_SHARDS);
}

static size_t
ngx_http_rk_region_bytes(ngx_http_rk_zone_t *zone, uint64_t keys)
{
    if (zone->concurrency) {
        return rk_shared_concurrency_region_bytes(zone->max_in_flight, keys, zone->spec.max_key_bytes, RK_SHARDS);
    }
    return rk_shared_region_bytes(keys, zone->spec.max_key_bytes, RK_SHARDS);
}

/* This process's handle on the zone's region, formatting it first or attaching to it as it is. */
static rk_status
ngx_http_rk_open_region(ngx_http_rk_zone_t *zone, int format)
{
    if (zone->concurrency) {
        return rk_shared_concurrency_in_region(zone->region, zone->region_bytes, format, zone->max_in_flight,
                                               zone->lease_ttl_ns, zone->spec.max_keys, zone->spec.max_key_bytes,
                                               RK_SHARDS, &zone->leases);
    }
    return rk_shared_in_region(zone->region, zone->region_bytes, format, &zone->spec, RK_SHARDS, &zone->shared);
}

/* The zone's region: formatted on first start, attached again on reload when the zone's parameters are unchanged,
 * formatted afresh (with a notice, as many keys as fit) when they changed. */
static ngx_int_t
ngx_http_rk_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_rk_zone_t  *old = data, *zone = shm_zone->data;
    ngx_slab_pool_t     *shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    size_t               available;
    uint64_t             keys;

    if (old != NULL && old->region != NULL) {
        ngx_memcpy(zone->digest_seed, old->digest_seed, RK_KEY_DIGEST_BYTES);  /* long keys keep their counts */
        zone->region = old->region;
        zone->region_bytes = old->region_bytes;
        zone->spec.max_keys = old->spec.max_keys;
        if (old->concurrency == zone->concurrency && ngx_http_rk_open_region(zone, 0) == RK_OK) {
            return NGX_OK;
        }
        ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                      "ratekeeper_zone \"%V\" changed (%s): its state starts afresh", &zone->name,
                      old->concurrency == zone->concurrency ? rk_last_error() : "its algorithm");
        zone->spec.max_keys = ngx_http_rk_keys_that_fit(zone, zone->region_bytes);
        if (zone->spec.max_keys == 0 || ngx_http_rk_open_region(zone, 1) != RK_OK) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0, "ratekeeper_zone \"%V\": %s", &zone->name,
                          zone->spec.max_keys == 0 ? "no key fits in its region" : rk_last_error());
            return NGX_ERROR;
        }
        return NGX_OK;
    }
    if (rk_key_digest_seed(zone->digest_seed) != RK_OK) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0, "ratekeeper_zone \"%V\": %s", &zone->name,
                      rk_last_error());
        return NGX_ERROR;
    }
    /* What the slab allocator can still give as one block: its free pages, less one for rounding. */
    available = shpool->pfree > 1 ? (shpool->pfree - 1) * ngx_pagesize : 0;
    keys = ngx_http_rk_keys_that_fit(zone, available);
    if (keys < 64) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "ratekeeper_zone \"%V\" is too small: %uz bytes hold %uL keys of %uL bytes; give it more",
                      &zone->name, shm_zone->shm.size, keys, (uint64_t) zone->spec.max_key_bytes);
        return NGX_ERROR;
    }
    zone->spec.max_keys = keys;
    zone->region_bytes = ngx_http_rk_region_bytes(zone, keys);
    zone->region = ngx_slab_alloc(shpool, zone->region_bytes);
    if (zone->region == NULL) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0, "ratekeeper_zone \"%V\": cannot allocate %uz bytes",
                      &zone->name, zone->region_bytes);
        return NGX_ERROR;
    }
    if (ngx_http_rk_open_region(zone, 1) != RK_OK) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0, "ratekeeper_zone \"%V\": %s", &zone->name,
                      rk_last_error());
        return NGX_ERROR;
    }
    ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0, "ratekeeper_zone \"%V\": %uL keys of up to %uL bytes",
                  &zone->name, keys, (uint64_t) zone->spec.max_key_bytes);
    return NGX_OK;
}

static void
ngx_http_rk_free_handle(void *data)
{
    ngx_http_rk_zone_t  *zone = data;

    rk_shared_free(zone->shared);  /* the handles; the region lives on in the zone */
    zone->shared = NULL;
    rk_shared_concurrency_free(zone->leases);
    zone->leases = NULL;
}

/* "10r/s", "100r/m", "5r/h", "0.5r/s"; a plain number takes its window from window=. */
static ngx_int_t
ngx_http_rk_parse_rate(ngx_str_t *s, double *limit, int64_t *window_ns)
{
    u_char  buf[64];
    char   *end;
    size_t  n = s->len;

    if (n > 3 && s->data[n - 3] == 'r' && s->data[n - 2] == '/') {
        switch (s->data[n - 1]) {
        case 's': *window_ns = 1000000000LL; break;
        case 'm': *window_ns = 60000000000LL; break;
        case 'h': *window_ns = 3600000000000LL; break;
        default: return NGX_ERROR;
        }
        n -= 3;
    }
    if (n == 0 || n >= sizeof(buf)) {
        return NGX_ERROR;
    }
    ngx_memcpy(buf, s->data, n);
    buf[n] = '\0';
    *limit = strtod((const char *) buf, &end);
    return end == (char *) buf + n ? NGX_OK : NGX_ERROR;
}

/* Whether a ratekeeper_zone parameter belongs to the rate algorithms alone (not to concurrency). */
static ngx_flag_t
ngx_http_rk_rate_param(ngx_str_t *name)
{
    static const char  *rate_params[] = { "rate", "window", "half_life", "burst", "capacity", "count_refused", NULL };
    ngx_uint_t          i;

    for (i = 0; rate_params[i] != NULL; i++) {
        if (name->len == ngx_strlen(rate_params[i]) && ngx_strncmp(name->data, rate_params[i], name->len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A concurrency zone's parameters, checked: max_in_flight= given, no rate's parameter, the lease's time to live as
 * the library bounds it (rk_concurrency_new says what is wrong). */
static char *
ngx_http_rk_check_concurrency(ngx_conf_t *cf, ngx_http_rk_zone_t *zone, ngx_str_t *name, ngx_str_t *rate_param,
    ngx_uint_t have_max_in_flight)
{
    rk_concurrency  *probe;

    if (rate_param->len > 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratekeeper_zone \"%V\": algorithm=concurrency takes max_in_flight= and lease_ttl=, "
                           "not %V=", name, rate_param);
        return NGX_CONF_ERROR;
    }
    if (!have_max_in_flight) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratekeeper_zone \"%V\": max_in_flight= is required with algorithm=concurrency", name);
        return NGX_CONF_ERROR;
    }
    if (rk_concurrency_new(zone->max_in_flight, zone->lease_ttl_ns, &probe) != RK_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone \"%V\": %s", name, rk_last_error());
        return NGX_CONF_ERROR;
    }
    rk_concurrency_free(probe);
    zone->concurrency = 1;
    return NGX_CONF_OK;
}

static char *
ngx_http_rk_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t           *value = cf->args->elts, name = ngx_null_string, s, v;
    ngx_http_rk_zone_t  *zone;
    ngx_uint_t           i, have_rate = 0, have_window = 0, have_max_in_flight = 0;
    ngx_str_t            rate_param = ngx_null_string, lease_param = ngx_null_string;
    int64_t              rate_window_ns = 0;
    ssize_t              size = 0;
    ngx_int_t            n;
    double               limit = 0;
    int64_t              window_ns = 1000000000LL;
    u_char              *colon;

    (void) cmd;
    (void) conf;
    zone = ngx_pcalloc(cf->pool, sizeof(ngx_http_rk_zone_t));
    if (zone == NULL) {
        return NGX_CONF_ERROR;
    }
    rk_spec_init(&zone->spec);
    zone->spec.max_key_bytes = 64;
    ngx_cpystrn(zone->algorithm, (u_char *) "earrrl", sizeof(zone->algorithm));

    for (i = 1; i < cf->args->nelts; i++) {
        s = value[i];
        colon = ngx_strlchr(s.data, s.data + s.len, '=');
        if (colon == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: \"%V\" is not name=value", &s);
            return NGX_CONF_ERROR;
        }
        v.data = colon + 1;
        v.len = s.data + s.len - v.data;
        s.len = colon - s.data;
        if (rate_param.len == 0 && ngx_http_rk_rate_param(&s)) {
            rate_param = s;
        }

        if (s.len == 4 && ngx_strncmp(s.data, "zone", 4) == 0) {
            u_char *c = ngx_strlchr(v.data, v.data + v.len, ':');
            if (c == NULL || c == v.data) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: zone=\"%V\" is not NAME:SIZE", &v);
                return NGX_CONF_ERROR;
            }
            name.data = v.data;
            name.len = c - v.data;
            ngx_str_t sz = { (size_t) (v.data + v.len - (c + 1)), c + 1 };
            size = ngx_parse_size(&sz);
            if (size == NGX_ERROR || size < (ssize_t) (8 * ngx_pagesize)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "ratekeeper_zone: zone \"%V\" size \"%V\" is not a size of at least %uzk",
                                   &name, &sz, 8 * ngx_pagesize / 1024);
                return NGX_CONF_ERROR;
            }
        } else if (s.len == 9 && ngx_strncmp(s.data, "algorithm", 9) == 0) {
            if (v.len == 0 || v.len >= sizeof(zone->algorithm)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: algorithm \"%V\" is unknown", &v);
                return NGX_CONF_ERROR;
            }
            ngx_cpystrn(zone->algorithm, v.data, v.len + 1);
        } else if (s.len == 4 && ngx_strncmp(s.data, "rate", 4) == 0) {
            if (ngx_http_rk_parse_rate(&v, &limit, &rate_window_ns) != NGX_OK) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "ratekeeper_zone: rate \"%V\" is not like 10r/s, 100r/m, 5r/h or 0.5r/s", &v);
                return NGX_CONF_ERROR;
            }
            have_rate = 1;
        } else if ((s.len == 6 && ngx_strncmp(s.data, "window", 6) == 0)
                   || (s.len == 9 && ngx_strncmp(s.data, "half_life", 9) == 0))
        {
            n = ngx_parse_time(&v, 0);  /* milliseconds */
            if (n == NGX_ERROR || n <= 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: %V \"%V\" is not a duration like 10s",
                                   &s, &v);
                return NGX_CONF_ERROR;
            }
            if (s.len == 6) {
                window_ns = (int64_t) n * 1000000LL;
                have_window = 1;
            } else {
                zone->spec.half_life_ns = (int64_t) n * 1000000LL;
            }
        } else if ((s.len == 5 && ngx_strncmp(s.data, "burst", 5) == 0)
                   || (s.len == 8 && ngx_strncmp(s.data, "capacity", 8) == 0)
                   || (s.len == 8 && ngx_strncmp(s.data, "key_size", 8) == 0))
        {
            n = ngx_atoi(v.data, v.len);
            if (n == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: %V \"%V\" is not a whole number", &s, &v);
                return NGX_CONF_ERROR;
            }
            if (s.data[0] == 'b') {
                zone->spec.burst = (double) n;
            } else if (s.data[0] == 'c') {
                zone->spec.capacity = (double) n;
            } else if (n < 1 || n > 4096) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: key_size %V is not from 1 to 4096", &v);
                return NGX_CONF_ERROR;
            } else {
                /* At least a digest's size: a longer key is stored as its digest (ngx_http_rk_stored_key). */
                zone->spec.max_key_bytes = (uint64_t) ngx_max(n, RK_KEY_DIGEST_BYTES);
            }
        } else if (s.len == 13 && ngx_strncmp(s.data, "max_in_flight", 13) == 0) {
            n = ngx_atoi(v.data, v.len);
            if (n == NGX_ERROR || n < 1 || n > RK_SHARED_MAX_IN_FLIGHT) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: max_in_flight \"%V\" is not from 1 to %d",
                                   &v, RK_SHARED_MAX_IN_FLIGHT);
                return NGX_CONF_ERROR;
            }
            zone->max_in_flight = (uint32_t) n;
            have_max_in_flight = 1;
            lease_param = s;
        } else if (s.len == 9 && ngx_strncmp(s.data, "lease_ttl", 9) == 0) {
            n = ngx_parse_time(&v, 0);  /* milliseconds */
            if (n == NGX_ERROR || n <= 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: lease_ttl \"%V\" is not a duration like 60s",
                                   &v);
                return NGX_CONF_ERROR;
            }
            zone->lease_ttl_ns = (int64_t) n * 1000000LL;
            lease_param = s;
        } else if (s.len == 13 && ngx_strncmp(s.data, "count_refused", 13) == 0) {
            if (v.len == 2 && ngx_strncmp(v.data, "on", 2) == 0) {
                zone->spec.count_refused = 1;
            } else if (v.len == 3 && ngx_strncmp(v.data, "off", 3) == 0) {
                zone->spec.count_refused = 0;
            } else {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: count_refused \"%V\" is not on or off", &v);
                return NGX_CONF_ERROR;
            }
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: unknown parameter \"%V\"", &value[i]);
            return NGX_CONF_ERROR;
        }
    }
    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone: zone=NAME:SIZE is required");
        return NGX_CONF_ERROR;
    }
    zone->name = name;
    zone->spec.algorithm = (const char *) zone->algorithm;
    if (ngx_strcmp(zone->algorithm, "concurrency") == 0) {
        if (ngx_http_rk_check_concurrency(cf, zone, &name, &rate_param, have_max_in_flight) != NGX_CONF_OK) {
            return NGX_CONF_ERROR;
        }
        return ngx_http_rk_add_zone(cf, zone, size);
    }
    if (lease_param.len > 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone \"%V\": %V= is for algorithm=concurrency", &name,
                           &lease_param);
        return NGX_CONF_ERROR;
    }
    if (!have_rate) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone \"%V\": rate= is required", &name);
        return NGX_CONF_ERROR;
    }
    if (!have_window && rate_window_ns > 0) {
        window_ns = rate_window_ns;  /* 10r/m: 10 a minute, unless window= says otherwise */
    }
    zone->spec.limit = limit;
    zone->spec.window_ns = window_ns;
    if (ngx_strcmp(zone->algorithm, "sliding_log") == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratekeeper_zone \"%V\": sliding_log keeps memory per key that grows with its limit and "
                           "cannot live in a shared zone; use sliding_window", &name);
        return NGX_CONF_ERROR;
    }
    if (rk_spec_check(&zone->spec) != RK_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone \"%V\": %s", &name, rk_last_error());
        return NGX_CONF_ERROR;
    }
    return ngx_http_rk_add_zone(cf, zone, size);
}

/* The zone's shared memory, made by nginx, initialized by ngx_http_rk_init_zone in the master. */
static char *
ngx_http_rk_add_zone(ngx_conf_t *cf, ngx_http_rk_zone_t *zone, ssize_t size)
{
    ngx_shm_zone_t      *shm_zone;
    ngx_pool_cleanup_t  *cln;
    ngx_str_t           *name = &zone->name;

    shm_zone = ngx_shared_memory_add(cf, name, size, &ngx_http_ratekeeper_module);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }
    if (shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper_zone \"%V\" is already declared", name);
        return NGX_CONF_ERROR;
    }
    shm_zone->init = ngx_http_rk_init_zone;
    shm_zone->data = zone;
    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_CONF_ERROR;
    }
    cln->handler = ngx_http_rk_free_handle;
    cln->data = zone;
    return NGX_CONF_OK;
}

static char *
ngx_http_rk_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_rk_loc_conf_t            *lcf = conf;
    ngx_str_t                         *value = cf->args->elts, name = ngx_null_string, key = ngx_null_string, v;
    ngx_http_rk_limit_t               *limit;
    ngx_http_compile_complex_value_t   ccv;
    ngx_uint_t                         i, cost = 1, cost_given = 0;
    ngx_int_t                          n;

    (void) cmd;
    for (i = 1; i < cf->args->nelts; i++) {
        v = value[i];
        if (v.len > 5 && ngx_strncmp(v.data, "zone=", 5) == 0) {
            name.data = v.data + 5;
            name.len = v.len - 5;
        } else if (v.len > 4 && ngx_strncmp(v.data, "key=", 4) == 0) {
            key.data = v.data + 4;
            key.len = v.len - 4;
        } else if (v.len > 5 && ngx_strncmp(v.data, "cost=", 5) == 0) {
            n = ngx_atoi(v.data + 5, v.len - 5);
            if (n == NGX_ERROR || n > 1000000000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper: cost \"%V\" is not a whole number to 1e9", &v);
                return NGX_CONF_ERROR;
            }
            cost = (ngx_uint_t) n;
            cost_given = 1;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper: unknown parameter \"%V\" (zone=, key=, cost=)", &v);
            return NGX_CONF_ERROR;
        }
    }
    if (name.len == 0 || key.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper: zone=NAME and key=VALUE are both required");
        return NGX_CONF_ERROR;
    }
    if (lcf->limits == NGX_CONF_UNSET_PTR || lcf->limits == NULL) {
        lcf->limits = ngx_array_create(cf->pool, 2, sizeof(ngx_http_rk_limit_t));
        if (lcf->limits == NULL) {
            return NGX_CONF_ERROR;
        }
    }
    limit = ngx_array_push(lcf->limits);
    if (limit == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(limit, sizeof(ngx_http_rk_limit_t));
    limit->cost = cost;
    limit->cost_given = cost_given;
    /* A zone declared later in the file is found too: the size is filled in by its ratekeeper_zone. */
    limit->shm_zone = ngx_shared_memory_add(cf, &name, 0, &ngx_http_ratekeeper_module);
    if (limit->shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = &key;
    ccv.complex_value = &limit->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static void *
ngx_http_rk_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_rk_loc_conf_t  *lcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_rk_loc_conf_t));

    if (lcf == NULL) {
        return NULL;
    }
    lcf->limits = NGX_CONF_UNSET_PTR;
    lcf->status = NGX_CONF_UNSET_UINT;
    lcf->dry_run = NGX_CONF_UNSET;
    lcf->headers = NGX_CONF_UNSET;
    return lcf;
}

static char *
ngx_http_rk_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_rk_loc_conf_t  *prev = parent, *conf = child;
    ngx_http_rk_limit_t     *limits;
    ngx_uint_t               i;

    if (conf->limits == NGX_CONF_UNSET_PTR) {
        conf->limits = prev->limits == NGX_CONF_UNSET_PTR ? NULL : prev->limits;
    }
    ngx_conf_merge_uint_value(conf->status, prev->status, 429);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    if (conf->limits != NULL) {
        limits = conf->limits->elts;
        for (i = 0; i < conf->limits->nelts; i++) {
            if (limits[i].shm_zone->data == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratekeeper: zone \"%V\" is not declared by ratekeeper_zone",
                                   &limits[i].shm_zone->shm.name);
                return NGX_CONF_ERROR;
            }
            if (limits[i].cost_given && ((ngx_http_rk_zone_t *) limits[i].shm_zone->data)->concurrency) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "ratekeeper: zone \"%V\" is a concurrency zone: a request takes one slot, "
                                   "cost= does not apply", &limits[i].shm_zone->shm.name);
                return NGX_CONF_ERROR;
            }
        }
    }
    return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_rk_init(ngx_conf_t *cf)
{
    ngx_http_core_main_conf_t  *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt        *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);

    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_rk_handler;
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_rk_header_filter;
    return NGX_OK;
}
