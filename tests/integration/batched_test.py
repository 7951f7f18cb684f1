#!/usr/bin/python3
"""`sharing: batched` (docs/redis.md): a fleet of real `ratekeeper serve` processes deciding one hot key in process
and sharing their hits through one real redis-server (and a 3-primary Cluster). Run by ctest:
batched_test.py BINARY.

The fleet admits at least the limit and at most the limit plus the bound docs/redis.md gives:
fleet request rate x (5 x interval + round trip), the round trip taken at its ceiling, --redis-timeout.
"""
import json
import os
import sys
import threading
import time
import unittest
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_test  # noqa: E402  (the Redis, Cluster and Server helpers)
from redis_test import Cluster, Redis, Server, cli, same_hour, wait_until, within  # noqa: E402

INTERVAL = 0.02   # --redis-batch-interval's default
TIMEOUT = 0.1     # --redis-timeout's default: no round trip that counts takes longer
LIMIT = 300

RULES = """
domain: api
sharing: batched
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: fixed_window}
"""


def bound(rate):
    """docs/redis.md: what the fleet may admit past the limit, at `rate` requests a second on the key."""
    return rate * (5 * INTERVAL + TIMEOUT)


def load(servers, threads_per_server, per_thread, value):
    """Each server gets its share of threads, each sending `per_thread` checks; returns (allowed, refused, seconds)."""
    counts = {"allowed": 0, "refused": 0, "other": 0}
    lock = threading.Lock()

    def run(server):
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        mine = {"allowed": 0, "refused": 0, "other": 0}
        for _ in range(per_thread):
            status, body = server.check(value, conn=conn)
            fell_back = any("fallback" in s for s in body.get("statuses", []))
            mine["other" if fell_back else "allowed" if status == 200 else "refused" if status == 429 else "other"] += 1
        conn.close()
        with lock:
            for k, v in mine.items():
                counts[k] += v

    threads = [threading.Thread(target=run, args=(s,)) for s, n in zip(servers, threads_per_server) for _ in range(n)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts, time.monotonic() - start


class FleetTest(unittest.TestCase):
    def fleet_admits_within_the_bound(self, url):
        servers = [Server(RULES % LIMIT, url) for _ in range(3)]
        try:
            for attempt in range(2):  # a run that straddles the hour sees two windows: run it again
                value = "hot-%d-%d" % (os.getpid(), attempt)
                start = time.time()
                # Uneven: 60%, 30% and 10% of the requests.
                counts, seconds = load(servers, [6, 3, 1], 100, value)
                if same_hour(start, time.time()):
                    break
            total = sum(counts.values())
            rate = total / seconds
            self.assertEqual(counts["other"], 0, counts)
            self.assertGreaterEqual(counts["allowed"], LIMIT, counts)
            self.assertLessEqual(counts["allowed"], LIMIT + bound(rate), (counts, rate))
            print("\n%s: %d of %d admitted at %.0f requests/s (limit %d, bound +%.0f)" %
                  (url.split(":")[0], counts["allowed"], total, rate, LIMIT, bound(rate)), file=sys.stderr)
            # Once the batches have gone round, every server knows the fleet's count: none admits more.
            time.sleep(10 * INTERVAL)
            for s in servers:
                status, body = s.check(value)
                self.assertEqual(status, 429, body)
            self.assertGreater(min(s.metric("ratekeeper_redis_batches_total") for s in servers), 0)
        finally:
            for s in servers:
                s.stop()

    def test_three_servers_sharing_one_redis(self):
        redis = Redis()
        try:
            self.fleet_admits_within_the_bound("redis://127.0.0.1:%d" % redis.port)
        finally:
            redis.close()

    def test_three_servers_sharing_a_cluster(self):
        cluster = Cluster()
        try:
            self.fleet_admits_within_the_bound(cluster.url())
        finally:
            cluster.close()


class ReservationTest(unittest.TestCase):
    """A batch carries hits, not refunds: a batched domain holds no reservations, and says so."""

    def test_a_reserve_in_a_batched_domain_is_a_bad_request_that_charges_nothing(self):
        redis = Redis()
        server = Server(RULES % 10, "redis://127.0.0.1:%d" % redis.port)
        try:
            body = json.dumps({"domain": "api", "entries": [{"key": "user", "value": "r"}], "estimate": 5})
            status, _, data = server.request("POST", "/v1/reserve", body)
            error = json.loads(data)["error"]
            self.assertEqual((status, error["field"]), (400, "descriptor"), data)
            self.assertIn("sharing: batched", error["message"])
            for _ in range(10):
                self.assertEqual(server.check("r")[0], 200)
            self.assertEqual(server.check("r")[0], 429)
        finally:
            server.stop()
            redis.close()


class OutageTest(unittest.TestCase):
    """Redis killed: the domain decides locally (no fallback policy, in time); Redis back (empty, as a restarted
    Redis without persistence is): each server sends its count again, and each learns the others'."""

    LIMIT = 100

    def test_decides_locally_without_redis_and_catches_up_when_it_returns(self):
        redis = Redis()
        url = "redis://127.0.0.1:%d" % redis.port
        a, b = Server(RULES % self.LIMIT, url), Server(RULES % self.LIMIT, url)
        value = "outage-%d" % os.getpid()
        try:
            def checks(server, n):
                for _ in range(n):
                    started = time.monotonic()
                    status, body = server.check(value)
                    self.assertEqual(status, 200, body)
                    self.assertNotIn("fallback", body["statuses"][0])
                    self.assertLess(time.monotonic() - started, within(TIMEOUT))

            checks(a, 20)
            checks(b, 20)
            time.sleep(10 * INTERVAL)
            redis.stop()
            checks(a, 20)
            checks(b, 20)
            self.assertGreater(a.metric("ratekeeper_redis_batch_failed_keys_total"), 0)
            redis.start()

            def caught_up():
                keys = cli(redis.port, "--scan", "--pattern", "rk:{b:*c").split()
                if len(keys) != 1:
                    return False
                fields = cli(redis.port, "HGETALL", keys[0]).split()
                return sorted(int(v) for v in fields[1::2]) == [40, 40]
            wait_until(caught_up, "both servers' counts (40 each) back in Redis", 15)
            time.sleep(25 * INTERVAL)
            for server, used in ((a, 81), (b, 82)):
                status, body = server.check(value)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["statuses"][0]["limit_remaining"], self.LIMIT - used, body)
                time.sleep(25 * INTERVAL)
        finally:
            a.stop()
            b.stop()
            redis.close()


if __name__ == "__main__":
    redis_test.BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
