#!/usr/bin/python3
"""Faults under load: `ratekeeper serve` sharing limits through Redis, driven by wrk, while one fault at a time is
injected: Redis SIGKILLed and restarted, Redis paused with SIGSTOP (slow, not dead), a Redis Cluster primary failed
over, the rules file replaced with a broken one, with a good one, deleted; the service restarted.

Two domains with limits too high to be reached: `open` (redis_failure: fail_open) and `closed` (fail_closed). A
prober sends /v1/check to both, a few hundred a second, and classifies every answer against the policy:
  open:   200 (from Redis, or "fallback": "fail_open")
  closed: 200 from Redis, or 429 with "fallback": "fail_closed"
Anything else (a 5xx, an error, no answer within 2 s, a 429 for `open`) is outside the policy. wrk meanwhile loads
the server at full speed (forward-auth on `open`), and so does the gRPC load generator (bench/grpc_h2_load.cc,
Envoy's ShouldRateLimit on `open`, 32 calls in flight), where every answer must be OK: a failed call or an
OVER_LIMIT is outside the policy (when a restart closes its connections it connects again; the calls it cut off or
refused unstarted are counted apart). For each fault: requests answered (wrk, gRPC and prober), answers outside the policy, p99 and max
latency of the prober's requests during the fault, errors logged by the server, and how long after Redis
returned the decisions came from Redis again.

  bench/faults.py build/release/ratekeeper [--grpc-load build/release/bench/rk_grpc_h2_load] [--timeout 100ms]
                  [--only redis_kill,...]
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from benchlib import parse_grpc_load, parse_wrk, wrk_command  # noqa: E402
import redis_test  # noqa: E402  (the Redis and Cluster fixtures: real redis-server processes on free ports)

RULES = """
domain: %s
redis_failure: %s
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: gcra, burst: 1000}
forward_auth:
  descriptors:
    - entries: [{key: client, from: header, header: X-Client}]
"""
BROKEN = "domain: open\ndescriptors:\n  - key: client\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"

LUA = """
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", nil, {["X-Client"] = "load-" .. (n % 1000)})
end
"""


class Server:
    def __init__(self, binary, rules_dir, redis_url, timeout):
        self.binary, self.rules_dir, self.redis_url, self.timeout = binary, rules_dir, redis_url, timeout
        self.port, self.admin, self.grpc = redis_test.free_port(), redis_test.free_port(), redis_test.free_port()
        self.log_path = os.path.join(rules_dir, "..", "server.log")
        self.start()

    def start(self):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", self.rules_dir, "--http", "127.0.0.1:%d" % self.port,
             "--admin", "127.0.0.1:%d" % self.admin, "--grpc", "127.0.0.1:%d" % self.grpc, "--redis", self.redis_url,
             "--redis-timeout", self.timeout, "--threads", "2"], stdout=self.log, stderr=subprocess.STDOUT)
        redis_test.wait_until(lambda: self.ready(), "ratekeeper to be ready")

    def ready(self):
        c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=1)
        try:
            c.request("GET", "/readyz")
            return c.getresponse().status == 200
        finally:
            c.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=15)
        self.log.close()

    def errors_logged(self):
        with open(self.log_path) as f:
            return sum(1 for line in f if '"level":"error"' in line)


class Prober:
    """Sends /v1/check to both domains from a few threads and records (time, domain, verdict, latency)."""

    def __init__(self, server, threads=4):
        self.server, self.records, self.lock, self.stopping = server, [], threading.Lock(), False
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, i):
        conn, n = None, 0
        while not self.stopping:
            domain = "open" if n % 2 == 0 else "closed"
            n += 1
            body = json.dumps({"domain": domain, "descriptors": [{"entries": [{"key": "client",
                                                                               "value": "p%d-%d" % (i, n % 50)}]}]})
            start = time.monotonic()
            verdict = "error"
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=2)
                conn.request("POST", "/v1/check", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                data = json.loads(r.read())
                fallback = data.get("statuses", [{}])[0].get("fallback")
                if domain == "open":
                    ok = r.status == 200 and fallback in (None, "fail_open")
                else:
                    ok = (r.status == 200 and fallback is None) or (r.status == 429 and fallback == "fail_closed")
                verdict = ("fallback" if fallback else "redis") if ok else "outside:%d:%s" % (r.status, fallback)
            except (OSError, http.client.HTTPException, ValueError):
                verdict = "unanswered"  # connection refused or reset, or no answer in 2 s
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.01)
            took = time.monotonic() - start
            with self.lock:
                self.records.append((start, domain, verdict, took))
            time.sleep(0.002)

    def stop(self):
        self.stopping = True
        for t in self.threads:
            t.join()


class GrpcLoad:
    """Runs the gRPC load generator on `open` until `end`, again whenever a closed connection ends a run early."""

    def __init__(self, load_binary, port, end, restart):
        self.restart = restart
        self.answered, self.failed, self.over_limit, self.cut_off, self.p99s, self.errors = 0, 0, 0, 0, [], []
        self.thread = threading.Thread(target=self.run, args=(load_binary, port, end))
        self.thread.start()

    def run(self, load_binary, port, end):
        while time.monotonic() < end - 0.5:
            seconds = max(1, int(end - time.monotonic()))
            started = time.monotonic()
            p = subprocess.run([load_binary, "127.0.0.1:%d" % port, "--seconds", str(seconds), "--inflight", "32",
                                "--domain", "open", "--key", "client"], capture_output=True, text=True)
            r = parse_grpc_load(p.stdout)
            if r is None:  # could not connect (the service is restarting): try again shortly
                self.errors.append(p.stderr.strip()[:120])
                time.sleep(0.05)
                continue
            rate, p99, failed, over = r["rate"], r["p99_ms"], r["failed"], r["over_limit"]
            self.answered += int(round(rate * (time.monotonic() - started)))
            self.over_limit += over
            self.p99s.append(p99)
            # Only when the fault is a restart: its connection closed, its GOAWAY refusing calls it had not started
            # (REFUSED_STREAM, HTTP/2 error 7: never processed, Envoy retries them), or gRPC's shutdown cancelling
            # calls received but not yet handed to the service (CANCELLED: Envoy applies its failure mode).
            cut = ("server closed the connection", "read: ", "HTTP/2 error 7", "grpc-status 1 CANCELLED")
            if self.restart and any(e in p.stderr for e in cut):
                self.cut_off += failed
            else:
                self.failed += failed
                if failed:
                    self.errors.append(p.stderr.strip()[:120])

    def join(self):
        self.thread.join()


def wrk_in_background(port, seconds, script):
    return subprocess.Popen(wrk_command("http://127.0.0.1:%d/v1/auth/open" % port, seconds, 32, script),
                            stdout=subprocess.PIPE, text=True)


def wrk_summary(proc):
    return parse_wrk(proc.communicate()[0])


def pct(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p * (len(values) - 1)))]


def run_fault(name, binary, grpc_load, timeout, inject, heal, cluster=False, restart=False):
    """Starts Redis (or a Cluster) and a server; loads it; injects at 2 s, heals at 5 s; observes until 9 s."""
    work = tempfile.mkdtemp(prefix="rk-faults-")
    rules_dir = os.path.join(work, "rules")
    os.makedirs(rules_dir)
    for domain, policy in (("open", "fail_open"), ("closed", "fail_closed")):
        with open(os.path.join(rules_dir, domain + ".yaml"), "w") as f:
            f.write(RULES % (domain, policy))
    store = redis_test.Cluster() if cluster else redis_test.Redis()
    url = store.url() if cluster else "redis://127.0.0.1:%d" % store.port
    server = Server(binary, rules_dir, url, timeout)
    script = os.path.join(work, "load.lua")
    with open(script, "w") as f:
        f.write(LUA)
    ctx = {"store": store, "server": server, "rules_dir": rules_dir}
    try:
        load = wrk_in_background(server.port, 9, script)
        t0 = time.monotonic()
        grpc = GrpcLoad(grpc_load, server.grpc, t0 + 9, restart) if grpc_load else None
        prober = Prober(server)
        time.sleep(2)
        t_fault = time.monotonic()
        inject(ctx)
        time.sleep(max(0, t_fault + 3 - time.monotonic()))
        t_heal = time.monotonic()
        heal(ctx)
        time.sleep(max(0, t0 + 9 - time.monotonic()))
        prober.stop()
        w = wrk_summary(load)
        if grpc:
            grpc.join()
        during = [r for r in prober.records if t_fault <= r[0] < t_heal + 1]
        outside = [r for r in prober.records if r[2].startswith("outside")]
        unanswered = [r for r in prober.records if r[2] == "unanswered"]
        # Back on Redis: from the heal to the first of a run of answers from Redis that lasts to the end.
        after = [r for r in prober.records if r[0] >= t_heal]
        back_at = None
        for i, r in enumerate(after):
            if all(x[2] == "redis" for x in after[i:]):
                back_at = r[0]
                break
        lat = [r[3] * 1000 for r in during if r[2] != "unanswered"]
        return {
            "fault": name,
            "wrk_requests": w["requests"], "wrk_non2xx": w["non2xx"], "wrk_socket_errors": w["socket_errors"],
            "probes": len(prober.records), "fallbacks": sum(1 for r in prober.records if r[2] == "fallback"),
            "outside_policy": len(outside), "unanswered": len(unanswered),
            "p99_ms": pct(lat, 0.99), "max_ms": max(lat) if lat else 0.0,
            "errors_logged": server.errors_logged(),
            "back_on_redis_s": (back_at - t_heal) if back_at is not None else None,
            "examples": sorted(set(r[2] for r in outside))[:3],
            "grpc_answered": grpc.answered if grpc else None,
            "grpc_outside_policy": (grpc.failed + grpc.over_limit) if grpc else None,
            "grpc_cut_off": grpc.cut_off if grpc else None,
            "grpc_p99_ms": max(grpc.p99s) if grpc and grpc.p99s else None,
            "grpc_errors": grpc.errors[:3] if grpc else None,
        }
    finally:
        try:
            server.stop()
        except Exception:
            server.proc.kill()
        store.close()
        shutil.rmtree(work, ignore_errors=True)


def kill_redis(ctx):
    ctx["store"].kill()


def start_redis(ctx):
    ctx["store"].start()


def stop_redis(ctx):
    ctx["store"].kill(signal.SIGSTOP)


def cont_redis(ctx):
    ctx["store"].kill(signal.SIGCONT)


def failover(ctx):
    cluster = ctx["store"]
    replica_port = cluster.replica_of(cluster.nodes[0])
    cluster.nodes[0].kill()
    redis_test.cli(replica_port, "CLUSTER", "FAILOVER", "TAKEOVER")


def nothing(ctx):
    pass


def rules_broken(ctx):
    with open(os.path.join(ctx["rules_dir"], "open.yaml.tmp"), "w") as f:
        f.write(BROKEN)
    os.replace(os.path.join(ctx["rules_dir"], "open.yaml.tmp"), os.path.join(ctx["rules_dir"], "open.yaml"))


def rules_good(ctx):
    with open(os.path.join(ctx["rules_dir"], "open.yaml.tmp"), "w") as f:
        f.write(RULES % ("open", "fail_open"))
    os.replace(os.path.join(ctx["rules_dir"], "open.yaml.tmp"), os.path.join(ctx["rules_dir"], "open.yaml"))


def rules_deleted(ctx):
    os.remove(os.path.join(ctx["rules_dir"], "closed.yaml"))


def rules_restored(ctx):
    with open(os.path.join(ctx["rules_dir"], "closed.yaml"), "w") as f:
        f.write(RULES % ("closed", "fail_closed"))


def restart_server(ctx):
    ctx["server"].stop()
    ctx["server"].start()


FAULTS = {
    "redis_kill": ("Redis SIGKILLed, restarted 3 s later", kill_redis, start_redis, {}),
    "redis_stop": ("Redis paused with SIGSTOP for 3 s (slow, not dead)", stop_redis, cont_redis, {}),
    "cluster_failover": ("Cluster primary SIGKILLed, its replica takes over", failover, nothing, {"cluster": True}),
    "rules_broken": ("rules file replaced with a broken one, then a good one", rules_broken, rules_good, {}),
    "rules_deleted": ("a rules file deleted, then restored", rules_deleted, rules_restored, {}),
    "restart": ("the service stopped (SIGTERM) and started again", restart_server, nothing, {"restart": True}),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--timeout", default="100ms")
    ap.add_argument("--grpc-load", default=None,
                    help="the gRPC load generator (default: bench/rk_grpc_h2_load beside the binary, if built)")
    ap.add_argument("--only", default=",".join(FAULTS))
    args = ap.parse_args()
    grpc_load = args.grpc_load or os.path.join(os.path.dirname(os.path.abspath(args.binary)), "bench", "rk_grpc_h2_load")
    if not os.access(grpc_load, os.X_OK):
        print("bench/faults.py: no gRPC load generator at %s: HTTP only" % grpc_load, file=sys.stderr)
        grpc_load = None
    rows = []
    for key in args.only.split(","):
        what, inject, heal, kw = FAULTS[key]
        r = run_fault(key, os.path.abspath(args.binary), grpc_load, args.timeout, inject, heal, **kw)
        r["what"] = what
        rows.append(r)
        print(json.dumps(r), flush=True)
    print()
    print("| fault | wrk requests (non-2xx, socket errors) | gRPC calls (outside policy, cut off; p99 ms) | probes | "
          "fallbacks | outside policy | unanswered | p99 / max ms during | errors logged | back on Redis after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        back = "%.2f s" % r["back_on_redis_s"] if r["back_on_redis_s"] is not None else "never"
        grpc = ("%d (%d, %d; %.1f)" % (r["grpc_answered"], r["grpc_outside_policy"], r["grpc_cut_off"],
                                       r["grpc_p99_ms"] or 0) if r["grpc_answered"] is not None else "–")
        print("| %s | %d (%d, %d) | %s | %d | %d | %d | %d | %.1f / %.1f | %d | %s |" % (
            r["what"], r["wrk_requests"], r["wrk_non2xx"], r["wrk_socket_errors"], grpc, r["probes"], r["fallbacks"],
            r["outside_policy"], r["unanswered"], r["p99_ms"], r["max_ms"], r["errors_logged"], back))


if __name__ == "__main__":
    main()
