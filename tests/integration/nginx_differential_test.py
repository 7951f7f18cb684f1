#!/usr/bin/python3
"""The nginx module against the C API, field by field (every algorithm on every store gives one answer).

Run by ctest: nginx_differential_test.py path/to/ngx_http_ratekeeper_module.so path/to/libratekeeper.so

Each case draws, from one seed, zones for every algorithm the module takes (all but sliding_log, which the registry
refuses in shared memory), locations that charge them with random costs (one zone or two; dry run, a status of
their own, header fields off), and a trace of a few hundred requests with random keys (short ones, ones longer than
a zone's key_size, none at all). It starts Debian's nginx with the module (two workers, reuseport, so both decide
on one zone) and sends the trace, one connection per request. Beside it, the reference: one region per zone
through the C API (rk_shared_in_region, rk_shared_peek_at/rk_shared_check_at, what the module calls), its
answers formatted by rk_format_headers. Every field nginx exposes is compared: the status (200, or the location's
ratekeeper_status), $ratekeeper_decision (sent as a header by add_header), RateLimit-Policy, RateLimit (name, r,
t), X-RateLimit-Limit, -Remaining, -Reset, and Retry-After (or its absence). leaky_queue's delay is not a field:
nginx holds the request that long (nginx_module_test.py checks it); here the delays would be hours, so a location
that may delay (may_delay) is a dry run, which waits for nothing (one that waited would time out the client).

Time. nginx reads its own clock, so the test cannot tell it the time: it brackets it. It reads CLOCK_REALTIME
(time.time_ns(), the clock rk::SystemClock reads too) before sending request i (b_i) and after its answer (a_i);
nginx decided at some tau_i in [b_i, a_i]. The reference peeks at b_i and at a_i, compares nginx with each, and
records the attempt (rk_shared_check_at) at the time whose answer nginx gave. What may differ between tau_i and the
time the reference used, and why each field is still compared exactly or within a derived bound:

- allowed (status, decision) and r: exact. The specs make them constant over the run: every algorithm that refills
  continuously (gcra, leaky_queue, token_bucket, leaky_bucket, earrrl) takes at least an hour per request
  (window/limit >= 1 h), and a run lasts less than S = 300 s (ctest's timeout; checked at the end). Keys start
  fresh, costs are whole, burst and capacity are whole (the module parses them so) and a fractional limit is a
  multiple of 1/4, so what a key may spend is an integer plus (fraction of the capacity, a multiple of 1/4) plus
  what refilled since its first request (< S/T <= 1/12): it never crosses a whole number, so allowed and
  floor(remaining) are the same at every instant of the run. earrrl: with C the cost counted so far, its N lies
  in [C (1 - lambda S), C] and lambda C S <= (S/T) C / n_saturate, so with frac(n_saturate) in [0.2, 0.8] (the
  generator draws half-lives until it is) N stays on C's side of n_saturate and n_saturate - N never crosses a whole
  number. fixed_window and sliding_window count whole requests and change only at instants fixed on the wall clock
  (a window's end; a step of the sliding window's weighted count, at least window/limit >= 60 s apart, as the
  generator draws them): a request's bracket, shorter than 60 s (checked; a socket here times out after 10 s),
  holds at most one such instant, so nginx answered as the reference does at b_i or at a_i. What it kept may still
  differ unseen (a window began within the bracket: the attempt counted in one window or the next; or both ends
  answer alike from outside but admit differently, two zones with header fields off): then the key is retired and a
  fresh one takes its place in the trace. (With 50 ms and 1 s windows, outside this derivation, 30,000 requests
  passed with 18 answers as at a_i and 120 keys retired; with the generator's windows both are rare.)
- t (RateLimit's t, X-RateLimit-Reset, Retry-After) is a duration rounded up to seconds, and durations move with
  the clock: nginx's lies within Omega of the reference's, and the test accepts every value from
  ceil((D - Omega) / 1 s) to ceil((D + Omega) / 1 s) — in practice one value, two when D is within a few
  milliseconds of a whole second. For fixed_window and sliding_window, D is an instant on the wall clock minus now:
  Omega = a_i - b_i. For the others, D is (a function of the key's earlier attempt times, moving at most one for one
  with each of them: gcra's TAT, a bucket's level, earrrl's N as a weighted mean) minus now: Omega = (a_i - b_i) +
  the widest bracket among the key's earlier attempts; 0 on a key's first attempt, whose durations depend on no
  time at all.
- Which zone binds (a location with two) is chosen by the library from the raw remaining (or the waits when both
  refuse), so zones whose values lie within their bounds of each other may bind either way: every such zone is
  a candidate, found by asking rk_format_headers itself with the values pushed to their bounds. Only earrrl's
  remaining is fractional; the others' are whole and exact, so for them the binding zone is exact.

A wall clock stepped (not slewed) during a run breaks the bracket; nothing else here depends on how fast the
machine is. Replay a case: RK_NGX_DIFF_SEED=<seed> RK_NGX_DIFF_CASES=1 (the seed is printed; by default a fresh
one per run, RK_NGX_DIFF_CASES cases from it). RK_NGX_DIFF_REQUESTS sets the requests per case.
"""
import ctypes
import math
import os
import random
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "capi"))
import nginx_module_test  # noqa: E402  (this directory: the Nginx runner)
from ctypes_test import Decision, Spec, load  # noqa: E402  (tests/capi: the C API's structs in ctypes)

LIB = None
NEVER = 2**63 - 1
S_NS = 10**9
HOUR = 3600 * S_NS
RUN_BOUND_NS = 300 * S_NS  # S in the docstring's derivation
BRACKET_BOUND_NS = 60 * S_NS  # the windowed algorithms' instants are at least this far apart
SHARDS = 16

ALGORITHMS = ["earrrl", "gcra", "token_bucket", "leaky_bucket", "leaky_queue", "fixed_window", "sliding_window"]
WINDOWED = ("fixed_window", "sliding_window")
FIELDS = ("RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
          "Retry-After")


class HeaderLimit(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("name_len", ctypes.c_size_t), ("quota", ctypes.c_double),
                ("window_ns", ctypes.c_int64), ("decision", Decision)]


class HeaderField(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_void_p), ("value_len", ctypes.c_size_t)]


def load_shared(path):
    lib = load(path)
    lib.rk_spec_check.argtypes = [ctypes.POINTER(Spec)]
    lib.rk_shared_region_bytes.restype = ctypes.c_size_t
    lib.rk_shared_region_bytes.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    lib.rk_shared_in_region.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(Spec),
                                        ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p)]
    lib.rk_shared_free.argtypes = [ctypes.c_void_p]
    for name in ("rk_shared_check_at", "rk_shared_peek_at"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64,
                                       ctypes.c_uint64, ctypes.POINTER(Decision)]
    lib.rk_headers_bytes.restype = ctypes.c_size_t
    lib.rk_headers_bytes.argtypes = [ctypes.POINTER(HeaderLimit), ctypes.c_size_t]
    lib.rk_format_headers.argtypes = [ctypes.POINTER(HeaderLimit), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                      ctypes.POINTER(HeaderField), ctypes.POINTER(ctypes.c_size_t)]
    return lib


# --- The reference: the C API over a region of its own per zone -------------------------------------------------

class Zone:
    """One ratekeeper_zone: its directive, its spec for the C API, and the reference region."""

    def __init__(self, name, algorithm, limit, window_ns, directive_params, **spec_fields):
        self.name, self.algorithm, self.limit, self.window_ns = name, algorithm, limit, window_ns
        self.directive = "ratekeeper_zone zone=%s:1m algorithm=%s %s;" % (name, algorithm, directive_params)
        self.spec = Spec()
        LIB.rk_spec_init(ctypes.byref(self.spec))
        self.algorithm_bytes = algorithm.encode()  # kept alive: spec.algorithm points into it
        self.spec.algorithm = self.algorithm_bytes
        self.spec.limit = limit
        self.spec.window_ns = window_ns
        for k, v in spec_fields.items():
            setattr(self.spec, k, v)
        self.handle = None

    def valid(self):
        return LIB.rk_spec_check(ctypes.byref(self.spec)) == 0

    def open(self):
        self.spec.max_keys = 256
        self.spec.max_key_bytes = 128  # the trace's long keys as they are; nginx stores some as digests
        size = LIB.rk_shared_region_bytes(self.spec.max_keys, self.spec.max_key_bytes, SHARDS)
        self.region = (ctypes.c_uint64 * (size // 8 + 1))()
        self.handle = ctypes.c_void_p()
        status = LIB.rk_shared_in_region(self.region, size, 1, ctypes.byref(self.spec), SHARDS,
                                         ctypes.byref(self.handle))
        assert status == 0, LIB.rk_last_error().decode()

    def close(self):
        LIB.rk_shared_free(self.handle)

    def decide(self, key, now_ns, cost, record):
        d = Decision()
        fn = LIB.rk_shared_check_at if record else LIB.rk_shared_peek_at
        status = fn(self.handle, key, len(key), now_ns, cost, ctypes.byref(d))
        assert status == 0, LIB.rk_last_error().decode()
        return d


def format_headers(limits):
    """rk_format_headers for [(zone, decision)]: {field: value}."""
    arr = (HeaderLimit * len(limits))()
    for i, (zone, d) in enumerate(limits):
        name = zone.name.encode()
        arr[i] = HeaderLimit(name, len(name), zone.limit, zone.window_ns, d)
    size = LIB.rk_headers_bytes(arr, len(limits))
    buf = ctypes.create_string_buffer(max(size, 1))
    fields = (HeaderField * 6)()
    n = ctypes.c_size_t()
    assert LIB.rk_format_headers(arr, len(limits), buf, size, fields, ctypes.byref(n)) == 0
    return {fields[i].name.decode(): ctypes.string_at(fields[i].value, fields[i].value_len).decode()
            for i in range(n.value)}


def copy(d, **changes):
    out = Decision()
    ctypes.pointer(out)[0] = d
    for k, v in changes.items():
        setattr(out, k, v)
    return out


def shifted(d, by_ns, remaining_by=0.0):
    """The decision with its durations moved by by_ns (never stays never, none goes below 0)."""
    def move(ns):
        return ns if ns == NEVER else max(0, ns + by_ns)
    return copy(d, retry_after_ns=move(d.retry_after_ns), reset_after_ns=move(d.reset_after_ns),
                remaining=max(0.0, d.remaining + remaining_by))


# --- The generator ---------------------------------------------------------------------------------------------

def duration_text(ns):
    ms = ns // 10**6
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return "%d%s" % (ms // size, unit)
    return "%dms" % ms


def draw_window(rng, shortest_ns):
    nice = [w for w in (60 * S_NS, 600 * S_NS, HOUR, 2 * HOUR, 12 * HOUR, 24 * HOUR, 7 * 24 * HOUR,
                        30 * 24 * HOUR, 365 * 24 * HOUR) if w >= shortest_ns]
    if rng.random() < 0.5:
        return rng.choice(nice)
    # Log-uniform, to the millisecond (the module's durations are nginx's, in ms): rarely a whole second.
    lo, hi = math.log(shortest_ns), math.log(400 * 24 * HOUR)
    return int(math.exp(rng.uniform(lo, hi))) // 10**6 * 10**6


def draw_zone(rng, name, algorithm):
    """A zone whose answers the docstring's derivation covers (see there for each constraint)."""
    while True:
        params, fields = [], {}
        if algorithm in WINDOWED:
            window = draw_window(rng, 60 * S_NS)
            limit = rng.randint(1, max(1, min(20, window // (60 * S_NS))))  # a step at most every 60 s
        else:
            window = draw_window(rng, HOUR)
            most = window / HOUR  # at least an hour a request
            limit = rng.randint(1, int(most)) if rng.random() < 0.4 else rng.randint(1, int(4 * most)) / 4
            limit = min(limit, 40)
        if window == HOUR and rng.random() < 0.5:
            params.append("rate=%sr/h" % format(limit, "g"))
        elif window == 60 * S_NS and rng.random() < 0.5:
            params.append("rate=%sr/m" % format(limit, "g"))
        else:
            params.append("rate=%s window=%s" % (format(limit, "g"), duration_text(window)))
        if algorithm == "earrrl":
            for _ in range(100):
                half_life = draw_window(rng, HOUR)
                n_saturate = limit * half_life / window / math.log(2)
                if 0.2 <= n_saturate % 1 <= 0.8:
                    break
            else:
                continue
            params.append("half_life=" + duration_text(half_life))
            fields["half_life_ns"] = half_life
        if algorithm in ("gcra", "leaky_queue") and rng.random() < 0.7:
            fields["burst"] = rng.randint(0, 5) if rng.random() < 0.8 else rng.randint(0, 40)
            params.append("burst=%d" % fields["burst"])
        if algorithm in ("token_bucket", "leaky_bucket") and rng.random() < 0.6:
            fields["capacity"] = rng.randint(1, 30)
            params.append("capacity=%d" % fields["capacity"])
        if rng.random() < 0.7:  # every algorithm (with it, a refused charge is owed as debt)
            fields["count_refused"] = rng.randint(0, 1)
            params.append("count_refused=" + ("on" if fields["count_refused"] else "off"))
        if rng.random() < 0.3:
            params.append("key_size=16")  # the trace's 41- and 101-byte keys go by their digests
        zone = Zone(name, algorithm, float(limit), window, " ".join(params), **fields)
        if zone.valid():
            return zone


def most_one_attempt(zone):
    """What one attempt may cost and still pass on a fresh key, roughly: the costs aim around it."""
    s = zone.spec
    if zone.algorithm in ("gcra", "leaky_queue"):
        return int(0 if math.isnan(s.burst) else s.burst) + 1
    if zone.algorithm in ("token_bucket", "leaky_bucket"):
        return int(zone.limit if math.isnan(s.capacity) else s.capacity)
    if zone.algorithm == "earrrl":
        return int(zone.limit * s.half_life_ns / zone.window_ns / math.log(2))
    return int(zone.limit)


def draw_cost(rng, zone):
    most = most_one_attempt(zone)
    return rng.choice([0, 1, 1, 1, 2, 3, most, most, most + 1, 10**9])


def may_delay(zone, cost):
    """Whether the zone may admit an attempt with a delay (of an hour or more here), which nginx would wait: only
    in a dry run, then, which waits for nothing. leaky_queue with burst 0 admits a cost of 1 only onto an empty
    queue (TAT <= now), so with no delay; a cost of 0 may join a queue."""
    burst = zone.spec.burst
    return zone.algorithm == "leaky_queue" and not ((math.isnan(burst) or burst == 0) and cost >= 1)


class Location:
    def __init__(self, path, limits, status, dry_run, headers):
        self.path, self.limits, self.status, self.dry_run, self.headers = path, limits, status, dry_run, headers

    def block(self):
        lines = ["ratekeeper zone=%s key=$http_x_key cost=%d;" % (z.name, c) for z, c in self.limits]
        if self.status != 429:
            lines.append("ratekeeper_status %d;" % self.status)
        if self.dry_run:
            lines.append("ratekeeper_dry_run on;")
        if not self.headers:
            lines.append("ratekeeper_headers off;")
        return "        location %s { %s empty_gif; }" % (self.path, " ".join(lines))


def draw_case(seed):
    rng = random.Random(seed)
    algorithms = ALGORITHMS + [rng.choice(ALGORITHMS) for _ in range(3)]
    zones = [draw_zone(rng, "z%d" % i, a) for i, a in enumerate(algorithms)]
    locations = []

    def add(limits):
        status = 429 if rng.random() < 0.7 else rng.choice([503, 420, 599])
        dry_run = rng.random() < 0.15 or any(may_delay(z, c) for z, c in limits)
        locations.append(Location("/l%d/" % len(locations), limits, status, dry_run, rng.random() > 0.1))

    for z in zones:
        for _ in range(rng.randint(1, 3)):
            add([(z, draw_cost(rng, z))])
    for _ in range(4):
        a, b = rng.sample(zones, 2)
        add([(a, draw_cost(rng, a)), (b, draw_cost(rng, b))])
    return rng, zones, locations


KEYS = [b"alpha", b"beta", b"gamma", b"L" * 40 + b"x", b"M" * 100 + b"y", b""]
KEY_WEIGHTS = [5, 4, 3, 1, 1, 0.3]


# --- Comparing one answer --------------------------------------------------------------------------------------

def expected_outcome(loc, decisions):
    if not decisions:
        return 200, ""
    refused = any(not d.allowed for d in decisions)
    if refused and not loc.dry_run:
        return loc.status, "refused"
    return 200, "dry_run" if refused else "allowed"


def binding_candidates(limits, omegas, tolerances):
    """The zones that may bind: for each, ask the library with the values pushed toward it binding."""
    out = []
    for j, (zone, _) in enumerate(limits):
        pushed = [(z, shifted(d, omegas[k] if k == j else -omegas[k],
                              -tolerances[k] if k == j else tolerances[k]))
                  for k, (z, d) in enumerate(limits)]
        if parse_rate_limit(format_headers(pushed)["RateLimit"])[0] == zone.name:
            out.append(j)
    return out


def parse_rate_limit(value):
    m = re.fullmatch(r'"([^"]*)";r=(\d+);t=(\d+)', value)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else (None, None, None)


def between(field, got, lo, hi):
    """Whether nginx's value lies between the values formatted at the two ends of the duration bound."""
    if lo == hi:
        return got == lo
    if field == "RateLimit":
        g, a, b = parse_rate_limit(got), parse_rate_limit(lo), parse_rate_limit(hi)
        return g[0] == a[0] and all(x <= y <= z for x, y, z in zip(a[1:], g[1:], b[1:]))
    return got.isdigit() and int(lo) <= int(got) <= int(hi)


def mismatch(loc, decisions, omegas, tolerances, status, headers):
    """What nginx answered that the reference's decisions, within the bounds, do not allow; or None."""
    want_status, want_decision = expected_outcome(loc, decisions)
    got_decision = headers.get("X-RK-Decision", "")
    if (status, got_decision) != (want_status, want_decision):
        return "status/decision: nginx %s %r, reference %s %r" % (status, got_decision, want_status, want_decision)
    got = {f: headers[f] for f in FIELDS if f in headers}
    if not decisions or not loc.headers:
        return "header fields where none belong: %r" % got if got else None
    applied = [(z, copy(d, allowed=1) if loc.dry_run else d) for (z, _), d in zip(loc.limits, decisions)]
    policy = format_headers(applied)["RateLimit-Policy"]
    if got.get("RateLimit-Policy") != policy:
        return "RateLimit-Policy: nginx %r, reference %r" % (got.get("RateLimit-Policy"), policy)
    name = parse_rate_limit(got.get("RateLimit", ""))[0]
    why = []
    for j in binding_candidates(applied, omegas, tolerances):
        zone, d = applied[j]
        lo = format_headers([(zone, shifted(d, -omegas[j]))])
        hi = format_headers([(zone, shifted(d, omegas[j]))])
        bad = [f for f in FIELDS[1:] if (f in got) != (f in lo) or (f in got and not between(f, got[f], lo[f], hi[f]))]
        if zone.name == name and not bad:
            return None
        why.append("binding %s: from %r to %r; differs in %s" % (zone.name, lo, hi, bad if zone.name == name
                                                                   else "the zone named"))
    return "header fields %r; reference (Omega %s ns): %s" % (got, omegas, "; ".join(why))


# --- The run ---------------------------------------------------------------------------------------------------

def describe(d):
    return "{allowed %d, remaining %r, retry_after %d, reset_after %d, estimate %r}" % (
        d.allowed, d.remaining, d.retry_after_ns, d.reset_after_ns, d.estimate if d.has_estimate else None)


class Case:
    def __init__(self, seed, requests):
        self.seed, self.requests = seed, requests
        self.rng, self.zones, self.locations = draw_case(seed)
        self.history = {}  # (zone, key) -> the widest bracket among its attempts so far
        self.log = []
        self.at_a = 0  # answers nginx gave as the reference did at a_i and not at b_i
        self.keys = list(KEYS)
        self.retired = 0  # keys whose state became unknowable (see step)

    def config(self):
        http = "\n".join("    " + z.directive for z in self.zones)
        server = "\n".join(["        add_header X-RK-Decision $ratekeeper_decision always;"] +
                           [loc.block() for loc in self.locations])
        return http, server

    def omegas(self, loc, key, width):
        out = []
        for zone, _ in loc.limits:
            if zone.algorithm in WINDOWED:
                out.append(width)
            elif (zone.name, key) in self.history:
                out.append(width + self.history[zone.name, key])
            else:
                out.append(0)
        return out

    def tolerances(self, loc, decisions, omegas):
        """How far nginx's raw remaining may lie from the reference's: only earrrl's is not a whole number."""
        out = []
        for (zone, cost), d, omega in zip(loc.limits, decisions, omegas):
            if zone.algorithm != "earrrl" or omega == 0:
                out.append(0.0)
                continue
            lam = math.log(2) / zone.spec.half_life_ns
            n_after = d.estimate / (lam * zone.window_ns) + cost
            out.append(lam * n_after * omega + 1e-9 * max(1.0, d.remaining))
        return out

    def step(self, nginx, i):
        loc = self.rng.choice(self.locations)
        slot = self.rng.choices(range(len(self.keys)), KEY_WEIGHTS)[0]
        key = self.keys[slot]
        b = time.time_ns()
        status, headers = nginx.get(loc.path, {"X-Key": key.decode()} if key else {})
        a = time.time_ns()
        assert a - b < BRACKET_BOUND_NS, "a request took %d ns: too long for the docstring's derivation" % (a - b)
        limits = loc.limits if key else []
        omegas = self.omegas(loc, key, a - b)
        entry = "%d: %s key=%s... at [%d, %d] -> nginx %s %s" % (
            i, loc.block().strip(), key[:8].decode(), b, a, status,
            {f: headers[f] for f in FIELDS + ("X-RK-Decision",) if f in headers})
        answers = {}  # time -> (the reference's decisions then, why nginx's answer is not theirs or None)
        for t in (b, a):
            decisions = [z.decide(key, t, c, record=False) for z, c in limits]
            answers[t] = decisions, mismatch(loc, decisions, omegas, self.tolerances(loc, decisions, omegas),
                                             status, headers)
        matching = [t for t in (b, a) if answers[t][1] is None]
        if not matching:
            self.log.append(entry)
            return "\n    ".join("reference at %d: %s\n      decisions %s" % (t, why, [describe(d) for d in ds])
                                for t, (ds, why) in answers.items())
        t = matching[0]
        recorded = [z.decide(key, t, c, record=True) for z, c in limits]
        assert [describe(d) for d in recorded] == [describe(d) for d in answers[t][0]]
        self.log.append(entry + " = reference at %s" % ("b" if t == b else "a"))
        self.at_a += t == a
        for z, _ in limits:
            self.history[z.name, key] = max(self.history.get((z.name, key), 0), a - b)
        # The state nginx kept may still be another than the reference's: a window began within the bracket (the
        # attempt counted in one window or the next), or both ends' answers look alike from outside but admit
        # differently (two zones, header fields off). Then the key's later answers cannot be known: a fresh key
        # takes its place in the trace.
        allowed = {t: [d.allowed for d in ds] for t, (ds, _) in answers.items()}
        if (any(z.algorithm in WINDOWED and b // z.window_ns != a // z.window_ns for z, _ in limits)
                or (len(matching) == 2 and allowed[b] != allowed[a])):
            self.keys[slot] = key + b"." + str(i).encode()
            self.retired += 1
        return None

    def run(self, test):
        for z in self.zones:
            z.open()
        http, server = self.config()
        nginx = nginx_module_test.Nginx(http, server)
        try:
            start = time.time_ns()
            for i in range(self.requests):
                why = self.step(nginx, i)
                if why is not None:
                    test.fail("seed %d (replay: RK_NGX_DIFF_SEED=%d RK_NGX_DIFF_CASES=1), request %s\n"
                              "  zones:\n%s\n  locations:\n%s\n  trace (last 15):\n    %s\n  differs:\n    %s" % (
                                  self.seed, self.seed, self.log[-1].split(":")[0], http, server,
                                  "\n    ".join(self.log[-15:]), why))
            span = time.time_ns() - start
            # The derivation of exact answers holds for runs shorter than RUN_BOUND_NS (see the docstring).
            test.assertLess(span, RUN_BOUND_NS, "the run took too long for the docstring's derivation to hold")
            return span
        finally:
            nginx.stop()
            for z in self.zones:
                z.close()


class NginxAgainstCApi(unittest.TestCase):
    def test_random_traces_answer_as_the_c_api_does(self):
        seed = int(os.environ.get("RK_NGX_DIFF_SEED") or random.SystemRandom().randrange(2**32))
        cases = int(os.environ.get("RK_NGX_DIFF_CASES", "6"))
        requests = int(os.environ.get("RK_NGX_DIFF_REQUESTS", "200"))
        print("seed %d (replay: RK_NGX_DIFF_SEED=%d RK_NGX_DIFF_CASES=1)" % (seed, seed), flush=True)
        for n in range(cases):
            case = Case(seed + n, requests)
            span = case.run(self)
            refused = sum(1 for line in case.log if "'X-RK-Decision': 'refused'" in line)
            print("case %d: %d zones (%s), %d locations, %d requests (%d refused; %d as at a_i, not b_i; %d keys "
                  "retired), %.1f s" % (seed + n, len(case.zones), " ".join(sorted(set(z.algorithm for z in case.zones))),
                                        len(case.locations), requests, refused, case.at_a, case.retired, span / 1e9),
                  flush=True)


if __name__ == "__main__":
    nginx_module_test.MODULE = os.path.abspath(sys.argv.pop(1))
    LIB = load_shared(sys.argv.pop(1))
    unittest.main(verbosity=2)
