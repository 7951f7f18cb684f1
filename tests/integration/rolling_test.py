#!/usr/bin/python3
"""A rolling restart of `ratekeeper serve` as Kubernetes makes one: two replicas on loopback under steady HTTP and
gRPC load, each in turn sent SIGTERM, waited for and started again, behind a client that routes as a load balancer
does (to the replicas whose /readyz says ready, read every READY_POLL). No request may fail, and none may be
admitted past the documented bound (docs/reliability.md, "Restarts"): with the in-process store each replica admits
at most the limit (its counters saved at shutdown to --state-file and restored at start), with Redis the two together
admit at most the limit. And the drain itself: not ready at once on SIGTERM (/readyz 503, gRPC health NOT_SERVING)
while still answering, a second signal ending it; a SIGTERM while the rules are being reloaded stops cleanly.
Run by ctest: rolling_test.py BINARY PROTO_DIR.
"""
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
import unittest

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from harness import free_port, wait_until  # noqa: E402  (tests/support: the shared helpers)
import grpc_test  # noqa: E402  (its message classes, generated from our .proto files)
from redis_test import Redis  # noqa: E402  (a redis-server on a free port)

BINARY = None
rls = health = None

LIMIT = 40
# A sliding log: at most LIMIT in any hour, with no window edge inside the test to reset a count.
RULES = ("domain: roll\ndescriptors:\n  - key: user\n"
         "    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: sliding_log}\n" % LIMIT)
READY_POLL = 0.05  # how often the client reads each replica's /readyz: far inside the drain
DRAIN = "1s"       # the replicas' --drain: the client's READY_POLL and a request in flight, many times over
GRACE = "5s"       # their --shutdown-grace


class Replica:
    """One `ratekeeper serve` with HTTP, admin and gRPC ports of its own, kept across restarts (as a pod's address
    is not, but a Service's endpoints are what the client follows here: readiness)."""

    def __init__(self, d, name, extra, drain=DRAIN, grace=GRACE):
        self.drain, self.grace = drain, grace
        self.dir = os.path.join(d, name)
        os.mkdir(self.dir)
        self.rules = os.path.join(self.dir, "rules.yaml")
        with open(self.rules, "w") as f:
            f.write(RULES)
        self.http_port, self.admin_port, self.grpc_port = free_port(), free_port(), free_port()
        self.extra = ["--state-file", os.path.join(self.dir, "state")] + list(extra)
        self.proc = None
        self.log = open(os.path.join(self.dir, "log"), "a+")

    def start(self):
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--config", self.rules, "--http", "127.0.0.1:%d" % self.http_port,
             "--admin", "127.0.0.1:%d" % self.admin_port, "--grpc", "127.0.0.1:%d" % self.grpc_port,
             "--drain", self.drain, "--shutdown-grace", self.grace, "--state-interval", "1h", *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(self.ready, "replica %d to be ready" % self.http_port)

    def ready(self):
        c = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=2)
        try:
            c.request("GET", "/readyz")
            return c.getresponse().status == 200
        finally:
            c.close()

    def stop(self, sig=signal.SIGTERM):
        """Sends `sig`; returns the exit code and how long the exit took."""
        began = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        return code, time.monotonic() - began

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Balancer:
    """Clients that send only to replicas whose /readyz said ready at the last look, as a load balancer does: HTTP
    /v1/check and gRPC ShouldRateLimit, round robin, for one key. Counts what each replica admitted and refused, and
    every request that failed (no answer, an error status, a gRPC error)."""

    def __init__(self, replicas, http_threads=2, grpc_threads=1):
        self.replicas = replicas
        self.ready = {r: False for r in replicas}
        self.epoch = {r: 0 for r in replicas}  # +1 each time a replica becomes ready: a new connection to it
        self.lock = threading.Lock()
        self.admitted = {r: 0 for r in replicas}
        self.refused = 0
        self.failures = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.watch)]
        self.threads += [threading.Thread(target=self.send, args=(self.http_check,)) for _ in range(http_threads)]
        self.threads += [threading.Thread(target=self.send, args=(self.grpc_check,)) for _ in range(grpc_threads)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for t in self.threads:
            t.join()

    def watch(self):
        while not self.stopping.is_set():
            for r in self.replicas:
                try:
                    ready = r.ready()
                except OSError:
                    ready = False
                with self.lock:
                    if ready and not self.ready[r]:
                        self.epoch[r] += 1
                    self.ready[r] = ready
            time.sleep(READY_POLL)

    def pick(self, turn):
        with self.lock:
            ready = [r for r in self.replicas if self.ready[r]]
            return (ready[turn % len(ready)], self.epoch[ready[turn % len(ready)]]) if ready else (None, 0)

    def send(self, check):
        connections = {}  # (replica, epoch) -> this thread's connection or channel
        turn = 0
        while not self.stopping.is_set():
            turn += 1
            r, epoch = self.pick(turn)
            if r is None:
                time.sleep(READY_POLL)
                continue
            try:
                allowed = check(r, epoch, connections)
            except Exception as e:  # noqa: BLE001  (every failure is counted and shown)
                with self.lock:
                    self.failures.append("%s to replica %d: %r" % (check.__name__, r.http_port, e))
                connections.pop((r, epoch), None)
                continue
            with self.lock:
                if allowed:
                    self.admitted[r] += 1
                else:
                    self.refused += 1
            time.sleep(0.005)
        for c in connections.values():
            c.close()

    def http_check(self, r, epoch, connections):
        c = connections.get((r, epoch))
        if c is None:
            c = connections[(r, epoch)] = http.client.HTTPConnection("127.0.0.1", r.http_port, timeout=10)
        body = json.dumps({"domain": "roll", "descriptors": [{"entries": [{"key": "user", "value": "u"}]}]})
        c.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
        response = c.getresponse()
        response.read()
        if response.status not in (200, 429):
            raise AssertionError("HTTP %d" % response.status)
        return response.status == 200

    def grpc_check(self, r, epoch, connections):
        channel = connections.get((r, epoch))
        if channel is None:
            channel = connections[(r, epoch)] = grpc.insecure_channel("127.0.0.1:%d" % r.grpc_port)
        should = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                     request_serializer=rls.RateLimitRequest.SerializeToString,
                                     response_deserializer=rls.RateLimitResponse.FromString)
        request = rls.RateLimitRequest(domain="roll")
        request.descriptors.add().entries.add(key="user", value="u")
        response = should(request, timeout=10)
        return response.overall_code == rls.RateLimitResponse.OK


class RollingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rk-rolling-")
        self.replicas = []

    def tearDown(self):
        for r in self.replicas:
            r.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def replica(self, name, extra=()):
        r = Replica(self.dir, name, extra)
        self.replicas.append(r)
        r.start()
        return r

    def roll(self, extra=()):
        """Two replicas under load, each restarted in turn; returns the balancer's counts."""
        a, b = self.replica("a", extra), self.replica("b", extra)
        with Balancer([a, b]) as lb:
            wait_until(lambda: all(lb.ready.values()) and sum(lb.admitted.values()) > 5, "load on both replicas")
            for r in (a, b):
                code, took = r.stop()
                self.assertEqual(code, 0, r.output())
                self.assertLess(took, 6.0, "past --shutdown-grace " + GRACE + " (and a second for the exit)")
                r.start()
                wait_until(lambda: lb.ready[r], "the balancer to see replica %d again" % r.http_port)
                time.sleep(0.3)  # load on both again before the next restart
        self.assertEqual(lb.failures, [], "%d requests failed" % len(lb.failures))
        self.assertGreater(lb.refused, 0, "the load went past the limit")
        for r in (a, b):
            self.assertIn('"msg":"draining"', r.output())
        return lb

    def test_in_process_each_replica_admits_at_most_the_limit_across_its_restart(self):
        lb = self.roll()
        for r, admitted in lb.admitted.items():
            self.assertLessEqual(admitted, LIMIT, "replica %d" % r.http_port)

    def test_with_redis_both_replicas_admit_at_most_the_limit_together(self):
        redis = Redis()
        self.addCleanup(redis.stop)
        lb = self.roll(["--redis", "redis://127.0.0.1:%d" % redis.port])
        self.assertLessEqual(sum(lb.admitted.values()), LIMIT)

    def test_sigterm_reports_not_ready_at_once_answers_and_a_second_signal_ends_the_drain(self):
        r = Replica(self.dir, "long", [], drain="60s", grace="70s")
        self.replicas.append(r)
        r.start()
        channel = grpc.insecure_channel("127.0.0.1:%d" % r.grpc_port)
        self.addCleanup(channel.close)
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=health.HealthCheckRequest.SerializeToString,
                                    response_deserializer=health.HealthCheckResponse.FromString)
        self.assertEqual(check(health.HealthCheckRequest(), timeout=10).status, health.HealthCheckResponse.SERVING)
        r.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: not r.ready(), "/readyz to say not ready")
        self.assertEqual(check(health.HealthCheckRequest(), timeout=10).status,
                         health.HealthCheckResponse.NOT_SERVING)
        lb = Balancer([r])  # not started: its checks, one of each, raise unless answered
        connections = {}
        self.assertTrue(lb.http_check(r, 0, connections), "HTTP still answered while draining")
        self.assertTrue(lb.grpc_check(r, 1, connections), "gRPC still answered while draining")
        for c in connections.values():
            c.close()
        began = time.monotonic()
        code, _ = r.stop(signal.SIGINT)
        self.assertEqual(code, 0)
        self.assertLess(time.monotonic() - began, 10, "the second signal ends the drain")
        self.assertIn('"msg":"drain ended by a second signal"', r.output())

    def test_sigterm_while_the_rules_are_reloaded_stops_cleanly(self):
        r = Replica(self.dir, "reloading", ["--reload-interval", "10ms"])
        self.replicas.append(r)
        big = RULES + "".join("  - key: k%d\n    rate_limit: {unit: hour, requests_per_unit: 5}\n" % i
                              for i in range(2000))  # a reload takes a while: the signal lands in one
        r.start()
        stop = threading.Event()

        def rewrite():
            n = 0
            while not stop.is_set():
                n += 1
                with open(r.rules + ".tmp", "w") as f:
                    f.write(big + "# %d\n" % n)
                os.replace(r.rules + ".tmp", r.rules)
                time.sleep(0.02)
        writer = threading.Thread(target=rewrite)
        writer.start()
        try:
            wait_until(lambda: r.output().count('"rules":"2001"') >= 2, "reloads under way")
            code, _ = r.stop(signal.SIGTERM)
        finally:
            stop.set()
            writer.join()
        self.assertEqual(code, 0, r.output())
        self.assertIn('"msg":"stopped"', r.output())
        self.assertNotIn("rules rejected", r.output())


def main():
    global BINARY, rls, health
    BINARY = sys.argv[1]
    grpc_test.PROTO_DIR = sys.argv[2]
    generated = tempfile.mkdtemp(prefix="rk-rolling-proto-")
    try:
        rls, health = grpc_test.generate(generated)
        del sys.argv[1:3]
        unittest.main()
    finally:
        shutil.rmtree(generated, ignore_errors=True)


if __name__ == "__main__":
    main()
