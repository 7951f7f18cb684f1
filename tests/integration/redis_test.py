#!/usr/bin/python3
"""`ratekeeper serve --redis`: real redis-server processes (a single server and a 3-primary Cluster) on loopback,
real ratekeeper processes sharing them, real HTTP clients. Run by ctest: redis_test.py BINARY.

Each test starts what it needs on free ports in a temporary directory and stops it at the end. Waiting is on real
processes (Redis starting, a Cluster failing over), polled with deadlines.
"""
import http.client
import json
import os
import select
import shutil
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import harness  # noqa: E402  (tests/support: the shared helpers)
from harness import Serve, wait_until  # noqa: E402

BINARY = None
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
MAKE_TEST_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "make_redis_certs.sh")


def free_port():
    """A free port whose Cluster bus port (port + 10000) is free too, and out of the kernel's ephemeral range."""
    return harness.free_port(offset=10000)


def within(timeout):
    """How long a decision bounded by the Redis `timeout` may take, seen from an HTTP client of the server while
    Python threads, the server and Redis share a busy 2-core machine (under a sanitizer too): a factor of the timeout
    plus a fixed slack for scheduling. Far below what a decision waiting on no deadline would take."""
    return 3 * timeout + 2.0


def cli(port, *args):
    out = subprocess.run([REDIS_CLI, "-p", str(port), *args], capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


class ServerExited(Exception):
    """Not an OSError, which wait_until() takes for "not yet"."""


class Certs:
    """The certificates of tests/support/make_redis_certs.sh (ca.crt, server.crt, client.crt, expired.crt, ...)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rk-certs-")
        subprocess.run([MAKE_TEST_CERTS, self.dir], check=True, timeout=60)

    def file(self, name):
        return os.path.join(self.dir, name)

    def redis_flags(self, tls_port, cert="server.crt"):
        """redis-server's flags for a TLS port (its plain port stays, for the test's own redis-cli)."""
        return ["--tls-port", str(tls_port), "--tls-cert-file", self.file(cert), "--tls-key-file",
                self.file("server.key"), "--tls-ca-cert-file", self.file("ca.crt"), "--tls-auth-clients", "optional"]

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Redis:
    """One redis-server; stop() kills it, start() brings it back on the same port. With `certs`, a TLS port too
    (tls_port), serving `cert`."""

    def __init__(self, extra=(), certs=None, cert="server.crt", bind="127.0.0.1", port=None):
        self.dir = tempfile.mkdtemp(prefix="rk-redis-")
        self.bind = bind
        self.port = port or free_port()
        self.proc = None
        # A free port can be taken between free_port() and the server's bind, by any process on the machine, and
        # so can a Cluster node's bus port (port + 10000, or tls_port + 10000): a server that exits at once gets
        # other ports.
        for attempt in range(5):
            self.tls_port = free_port() if certs else None
            self.extra = (certs.redis_flags(self.tls_port, cert) if certs else []) + list(extra)
            if self.start(may_fail=attempt < 4):
                break
            self.port = free_port()

    def start(self, may_fail=False):
        self.log = open(os.path.join(self.dir, "redis.log"), "a")
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", self.bind, "--save", "", "--appendonly", "no",
             "--dir", self.dir, *self.extra], stdout=self.log, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                if may_fail:
                    raise ServerExited("redis-server exited with %d" % self.proc.returncode)
                with open(self.log.name) as f:
                    raise AssertionError("redis-server on %d exited with %d: %s"
                                         % (self.port, self.proc.returncode, f.read()[-2000:]))
            try:  # briefly: whatever holds a stolen port may never answer
                answer = subprocess.run([REDIS_CLI, "-h", self.bind, "-p", str(self.port), "PING"],
                                        capture_output=True, text=True, timeout=2).stdout.strip()
                return answer == "PONG" or answer.startswith("NOAUTH")  # up, with --requirepass
            except subprocess.TimeoutExpired:
                return False

        try:
            wait_until(up, "redis-server on %d" % self.port)
        except ServerExited:
            self.log.close()
            return False
        return True

    def kill(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait()
            self.log.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """Three primaries, each with `replicas` replica, made with redis-cli --cluster create; with `certs`, over TLS
    (its bus too: --tls-cluster)."""

    def __init__(self, replicas=1, certs=None, extra=()):
        self.replicas = replicas
        self.certs = certs
        tls = ["--tls-cluster", "yes"] if certs else []
        self.nodes = [Redis(["--cluster-enabled", "yes", "--cluster-config-file", "nodes-%d.conf" % i,
                             "--cluster-node-timeout", "1000", *tls, *extra], certs)
                      for i in range(3 * (1 + replicas))]
        addresses = ["127.0.0.1:%d" % (n.tls_port or n.port) for n in self.nodes]
        via = ["--tls", "--cacert", certs.file("ca.crt")] if certs else []
        subprocess.run([REDIS_CLI, *via, "--cluster", "create", *addresses, "--cluster-replicas", str(replicas),
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        wait_until(lambda: all("cluster_state:ok" in cli(n.port, "CLUSTER", "INFO") for n in self.nodes),
                   "the cluster to be ok", 30)
        # "ok" comes before gossip has told every node who replicates whom, and before the replicas have synced:
        # wait for both, so that a test may ask any node for the topology and fail a primary over.
        wait_until(lambda: all(self._view_is_complete(n.port, 3 * replicas) for n in self.nodes),
                   "every node to see every node", 30)
        wait_until(lambda: all("master_link_status:up" in cli(n.port, "INFO", "replication")
                               for n in self.nodes if "role:slave" in cli(n.port, "INFO", "replication")),
                   "the replicas to be in sync", 30)

    @staticmethod
    def _view_is_complete(port, replica_count):
        lines = [l.split() for l in cli(port, "CLUSTER", "NODES").splitlines() if l.strip()]
        primaries = {l[0] for l in lines if "master" in l[2].split(",")}
        replicas = [l for l in lines if "slave" in l[2].split(",") and l[3] in primaries]
        return len(primaries) == 3 and len(replicas) == replica_count

    def replica_of(self, node):
        """The port of the replica of `node` (a primary), as the other nodes see it."""
        lines = [l.split() for l in cli(self.nodes[1 if node is self.nodes[0] else 0].port,
                                         "CLUSTER", "NODES").splitlines() if l.strip()]
        primary_id = next(l[0] for l in lines if ":%d@" % node.port in l[1])
        return next(int(l[1].split("@")[0].rsplit(":", 1)[1]) for l in lines if l[3] == primary_id)

    def url(self):
        if self.certs:
            return "rediss+cluster://" + ",".join("127.0.0.1:%d" % n.tls_port for n in self.nodes[:3])
        return "redis+cluster://" + ",".join("127.0.0.1:%d" % n.port for n in self.nodes[:3])

    def close(self):
        for n in self.nodes:
            n.close()


class Server(Serve):
    def __init__(self, rules_text, redis_url, extra=(), config=None, threads=2):
        super().__init__(BINARY, rules_text, [*(["--redis", redis_url] if redis_url else []),
                                              *(["--threads", str(threads)] if threads else []), *extra], config=config)

    def check(self, value, domain="api", key="user", conn=None):
        body = json.dumps({"domain": domain, "descriptors": [{"entries": [{"key": key, "value": value}]}]})
        status, _, data = self.request("POST", "/v1/check", body, conn=conn)
        return status, json.loads(data)

    def stop(self):
        super().stop(must_stop=True)


WINDOW_RULES = """
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: fixed_window}
"""

POLICY_RULES = """
domain: %s
redis_failure: %s
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}
"""


def hammer(servers, attempts, threads_per_server=4, value="shared"):
    """Sends `attempts` checks spread over the servers from several threads; returns (allowed, refused, other)."""
    counts = {"allowed": 0, "refused": 0, "other": 0}
    lock = threading.Lock()
    per_thread = attempts // (len(servers) * threads_per_server)

    def run(server):
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        mine = {"allowed": 0, "refused": 0, "other": 0}
        for _ in range(per_thread):
            status, body = server.check(value, conn=conn)
            fell_back = any("fallback" in s for s in body.get("statuses", []))
            key = "other" if fell_back else "allowed" if status == 200 else "refused" if status == 429 else "other"
            mine[key] += 1
        conn.close()
        with lock:
            for k, v in mine.items():
                counts[k] += v

    threads = [threading.Thread(target=run, args=(s,)) for s in servers for _ in range(threads_per_server)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def same_hour(a, b):
    return int(a // 3600) == int(b // 3600)


class SharedLimitTest(unittest.TestCase):
    def exact_global_limit(self, url, extra=(), then=None):
        # Exactness is the subject, not timeouts: a patient --redis-timeout, so that a busy machine (the suite under
        # a sanitizer, a build beside it) makes no decision fall back to the policy (seen at the default 100ms).
        extra = ["--redis-timeout", "2s", *extra]
        servers = [Server(WINDOW_RULES, url, extra), Server(WINDOW_RULES, url, extra)]
        try:
            for attempt in range(2):  # a run that straddles the hour sees two windows: run it again
                value = "user-%d-%d" % (os.getpid(), attempt)
                start = time.time()
                counts = hammer(servers, 4000, value=value)
                if same_hour(start, time.time()):
                    break
            self.assertEqual(counts, {"allowed": 1000, "refused": 3000, "other": 0})
            if then:
                then(servers)
        finally:
            for s in servers:
                s.stop()

    def test_two_servers_sharing_one_redis_admit_exactly_the_limit(self):
        redis = Redis()
        try:
            self.exact_global_limit("redis://127.0.0.1:%d" % redis.port)
        finally:
            redis.close()

    def test_servers_spinning_for_redis_answers_admit_exactly_the_limit_and_count_their_spins(self):
        """--redis-spin (docs/redis.md, "The client"): the same decisions, and spins that met answers, counted."""
        redis = Redis()
        try:
            def spun(servers):
                for s in servers:
                    self.assertGreater(s.metric('ratekeeper_redis_spins_total{result="answered"}'), 0)
            self.exact_global_limit("redis://127.0.0.1:%d" % redis.port, ["--redis-spin", "1ms"], then=spun)
        finally:
            redis.close()

    def test_two_servers_sharing_a_cluster_admit_exactly_the_limit(self):
        cluster = Cluster()
        try:
            self.exact_global_limit(cluster.url())
            # Packed states (docs/redis.md): a key's hash and its own key share a hash tag, so a slot; a 3-primary
            # Cluster runs the script as one node would.
            self.exact_global_limit(cluster.url(), ["--redis-packed-hashes", "16"])
        finally:
            cluster.close()


LEASE_RULES = """
domain: llm
descriptors:
  - key: user
    rate_limit: {algorithm: concurrency, max_in_flight: 10, lease_ttl: 2s}
"""


class ConcurrencyLeaseTest(unittest.TestCase):
    """`algorithm: concurrency` over HTTP (docs/service.md, "Concurrency leases"): two servers hold their leases in
    one Redis."""

    def lease(self, server, path, conn, lease=None):
        body = {"domain": "llm", "entries": [{"key": "user", "value": "42"}]}
        if lease is not None:
            body["lease"] = lease
        status, _, data = server.request("POST", path, json.dumps(body), conn=conn)
        return status, json.loads(data)

    def test_a_hundred_clients_on_two_servers_never_hold_more_than_ten_and_a_dead_clients_slot_comes_back(self):
        redis = Redis()
        url = "redis://127.0.0.1:%d" % redis.port
        servers = [Server(LEASE_RULES, url, ["--redis-timeout", "2s"]) for _ in range(2)]
        try:
            lock = threading.Lock()
            held = [0, 0, 0]  # holding now, most at once, granted
            errors = []

            def client(i):
                mine, other = servers[i % 2], servers[(i + 1) % 2]
                conns = {id(s): http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10) for s in servers}
                for _ in range(5):
                    status, body = self.lease(mine, "/v1/acquire", conns[id(mine)])
                    if status == 429:
                        continue
                    if status != 200:
                        errors.append((status, body))
                        return
                    with lock:
                        held[0] += 1
                        held[1] = max(held[1], held[0])
                        held[2] += 1
                    time.sleep(0.002)
                    with lock:
                        held[0] -= 1
                    status, body = self.lease(other, "/v1/release", conns[id(other)], body["lease"])
                    if status != 200:
                        errors.append((status, body))
                for c in conns.values():
                    c.close()

            threads = [threading.Thread(target=client, args=(i,)) for i in range(100)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors, [])
            self.assertLessEqual(held[1], 10)
            self.assertGreater(held[2], 10)

            # Ten clients take every slot and die; someone else's id and a made-up one free nothing.
            conn = http.client.HTTPConnection("127.0.0.1", servers[0].http_port, timeout=10)
            leases = [self.lease(servers[0], "/v1/acquire", conn)[1]["lease"] for _ in range(10)]
            status, body = self.lease(servers[0], "/v1/acquire", conn)
            self.assertEqual(status, 429, body)
            status, body = self.lease(servers[1], "/v1/release", conn=None, lease="0" * 32)
            self.assertEqual((status, body["error"]["field"]), (404, "lease"))
            self.assertEqual(self.lease(servers[1], "/v1/acquire", None)[0], 429)
            # After the TTL (2 s, on Redis's clock) the slots are back, and the dead clients' ids release nothing.
            wait_until(lambda: self.lease(servers[1], "/v1/acquire", None)[0] == 200, "the dead clients' slots back",
                       seconds=10)
            self.assertEqual(self.lease(servers[0], "/v1/release", conn, leases[0])[0], 404)
            conn.close()
        finally:
            for s in servers:
                s.stop()
            redis.close()


RESERVE_RULES = """
domain: llm
descriptors:
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 10000, algorithm: fixed_window, name: tokens}
"""


class ReservationTest(unittest.TestCase):
    """Reserve and settle over HTTP (docs/service.md, "Reserve and settle") with the counts in Redis: a reservation
    made through one server is settled through another, each step one script in Redis."""

    def call(self, server, path, conn=None, value="k1", **fields):
        body = {"domain": "llm", "entries": [{"key": "api_key", "value": value}], **fields}
        status, headers, data = server.request("POST", path, json.dumps(body), conn=conn)
        return status, json.loads(data)

    def remaining(self, server, value="k1"):
        body = json.dumps({"domain": "llm", "descriptors": [
            {"entries": [{"key": "api_key", "value": value}], "hits_addend": 0}]})
        return json.loads(server.request("POST", "/v1/check", body)[2])["statuses"][0]["limit_remaining"]

    def test_fifty_clients_on_two_servers_take_at_most_the_limit_plus_the_overdraws_in_flight(self):
        redis = Redis()
        url = "redis://127.0.0.1:%d" % redis.port
        servers = [Server(RESERVE_RULES, url, ["--redis-timeout", "2s"]) for _ in range(2)]
        try:
            lock = threading.Lock()
            taken = [0, 0]  # tokens used (the settles' actual), reservations granted
            errors = []
            start = time.time()

            def client(i):
                rng = __import__("random").Random(i)
                mine, other = servers[i % 2], servers[(i + 1) % 2]
                conns = {id(s): http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10) for s in servers}
                for _ in range(20):
                    estimate = 50 + rng.randrange(200)
                    status, body = self.call(mine, "/v1/reserve", conns[id(mine)], estimate=estimate)
                    if status == 429:
                        continue
                    if status != 200:
                        errors.append((status, body))
                        return
                    actual = rng.randrange(estimate + 2)  # at most 1 more than reserved
                    with lock:
                        taken[0] += actual
                        taken[1] += 1
                    status, body = self.call(other, "/v1/settle", conns[id(other)],
                                             reservation=body["reservation"], actual=actual)
                    if status != 200 or not body["settled"] or body["reserved"] != estimate:
                        errors.append((status, body))
                for c in conns.values():
                    c.close()

            threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors, [])
            if not same_hour(start, time.time()):
                self.skipTest("the hour's window turned during the test: the budget was given twice")
            # At most one overdraw of 1 per client in flight; and the refunds came back, so the clients used nearly
            # the whole budget (without them, about half: each settles at half its estimate on average).
            self.assertLessEqual(taken[0], 10000 + 50)
            self.assertGreaterEqual(taken[0], 9000)
            # Every refund and overdraw counted exactly once, in Redis: what is left is the limit less what was used.
            self.assertEqual(self.remaining(servers[0]), max(0, 10000 - taken[0]))
        finally:
            for s in servers:
                s.stop()
            redis.close()

    def test_a_settle_changes_nothing_unless_it_names_a_reservation_of_its_key_that_is_held(self):
        redis = Redis()
        url = "redis://127.0.0.1:%d" % redis.port
        servers = [Server(RESERVE_RULES, url, ["--redis-timeout", "2s"]) for _ in range(2)]
        try:
            a, b = servers
            status, r = self.call(a, "/v1/reserve", estimate=4000)
            self.assertEqual((status, r["reserved"], r["remaining"]), (200, True, 6000), r)
            self.assertEqual(self.remaining(b), 6000)
            # Another key's settle, a made-up id: 404 naming the reservation, nothing changed.
            status, body = self.call(b, "/v1/settle", value="k2", reservation=r["reservation"], actual=0)
            self.assertEqual((status, body["error"]["field"]), (404, "reservation"), body)
            status, body = self.call(b, "/v1/settle", reservation="0" * 32, actual=0)
            self.assertEqual(status, 404, body)
            self.assertEqual(self.remaining(a), 6000)
            # Settled for less through the other server: the 2,500 not used come back; a second settle is a 404.
            status, body = self.call(b, "/v1/settle", reservation=r["reservation"], actual=1500)
            self.assertEqual((status, body["settled"], body["reserved"], body["overdrew"]), (200, True, 4000, False))
            self.assertEqual(self.remaining(a), 8500)
            self.assertEqual(self.call(a, "/v1/settle", reservation=r["reservation"], actual=0)[0], 404)
            self.assertEqual(self.remaining(b), 8500)
            # An overdraw past what is left is recorded as a debt: the settle says it overdrew, the key is refused.
            status, big = self.call(a, "/v1/reserve", estimate=8000)
            self.assertEqual(status, 200, big)
            status, body = self.call(b, "/v1/settle", reservation=big["reservation"], actual=12000)
            self.assertEqual((status, body["overdrew"]), (200, True), body)
            self.assertEqual(self.remaining(a), 0)
            status, body = self.call(a, "/v1/reserve", estimate=1)
            self.assertEqual((status, body["reserved"]), (429, False), body)
            # A reservation past its ttl_seconds is gone, and stays charged as reserved.
            status, r = self.call(a, "/v1/reserve", value="k3", estimate=700, ttl_seconds=0.2)
            self.assertEqual(status, 200, r)
            time.sleep(0.4)  # twice the ttl, on Redis's clock
            self.assertEqual(self.call(b, "/v1/settle", value="k3", reservation=r["reservation"], actual=0)[0], 404)
            self.assertEqual(self.remaining(b, "k3"), 9300)
            # Redis gone: nothing is known, nothing is granted or settled.
            status, r = self.call(a, "/v1/reserve", value="k4", estimate=10)
            self.assertEqual(status, 200, r)
            redis.kill()
            for path, fields in [("/v1/reserve", {"estimate": 10}),
                                 ("/v1/settle", {"reservation": r["reservation"], "actual": 0})]:
                status, body = self.call(a, path, value="k4", **fields)
                self.assertEqual((status, body["error"]["reason"]), (503, "store_unavailable"), body)
        finally:
            for s in servers:
                s.stop()
            redis.close()


class FailureTest(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.url = "redis://127.0.0.1:%d" % self.redis.port

    def tearDown(self):
        self.redis.close()

    def test_each_policy_answers_in_time_when_redis_is_killed_and_redis_is_used_again_after(self):
        d = tempfile.mkdtemp(prefix="rk-rules-")
        try:
            for policy in ["fail_open", "fail_closed", "local"]:
                with open(os.path.join(d, policy + ".yaml"), "w") as f:
                    f.write(POLICY_RULES % (policy, policy))
            server = ServerDir(d, self.url, ["--redis-timeout", "200ms"])
            try:
                for policy in ["fail_open", "fail_closed", "local"]:
                    status, body = server.check("u", domain=policy)
                    self.assertEqual(status, 200, body)
                    self.assertNotIn("fallback", body["statuses"][0])
                self.assertEqual(len(cli(self.redis.port, "KEYS", "rk:*").split()), 3)

                self.redis.kill()
                answers = {}
                for policy in ["fail_open", "fail_closed", "local"]:
                    for _ in range(3):
                        t0 = time.monotonic()
                        status, body = server.check("u", domain=policy)
                        took = time.monotonic() - t0
                        self.assertLess(took, 2.0, "an answer took %.3f s with Redis dead" % took)
                        self.assertEqual(body["statuses"][0].get("fallback"), policy, body)
                        answers.setdefault(policy, []).append(status)
                self.assertEqual(answers["fail_open"], [200, 200, 200])
                self.assertEqual(answers["fail_closed"], [429, 429, 429])
                self.assertEqual(answers["local"], [200, 200, 429])  # the in-process limit of 2 per hour
                self.assertGreaterEqual(server.metric("ratekeeper_redis_breaker_opened_total"), 1)
                self.assertGreaterEqual(server.metric("ratekeeper_redis_fallbacks_total"), 9)

                self.redis.start()  # an empty Redis on the same port

                def back():
                    status, body = server.check("v", domain="fail_closed")
                    return status == 200 and "fallback" not in body["statuses"][0]
                wait_until(back, "decisions to go back to Redis")
                self.assertIn("v", cli(self.redis.port, "--scan", "--pattern", "rk:*"))
                # The outage was logged once, as an error with Redis's failure, and the return once: not per request.
                # Logged once everything has been answered for a second: keep asking until then.
                try:
                    wait_until(lambda: server.check("w", domain="fail_open")[0] in (200, 429) and
                               "the shared store answers again" in server.output(), "the return to be logged")
                except AssertionError:
                    raise AssertionError("the return was not logged:\n" + server.output())
                log = server.output()
                self.assertEqual(log.count("the shared store is not answering"), 1, log)
                self.assertEqual(log.count("the shared store answers again"), 1, log)
            finally:
                server.stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_redis_killed_under_load_every_request_answered_in_time(self):
        d = tempfile.mkdtemp(prefix="rk-rules-")
        try:
            with open(os.path.join(d, "r.yaml"), "w") as f:
                f.write(POLICY_RULES % ("api", "fail_open"))
            timeout = 0.1
            server = ServerDir(d, self.url, ["--redis-timeout", "%dms" % (timeout * 1000)])
            stop = threading.Event()
            stats = {"answered": 0, "failed": 0, "slowest": 0.0}
            lock = threading.Lock()

            def load(i):
                conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
                n = 0
                while not stop.is_set():
                    t0 = time.monotonic()
                    try:
                        status, _ = server.check("load-%d-%d" % (i, n), conn=conn)
                        ok = status in (200, 429)
                    except (OSError, http.client.HTTPException, ValueError):
                        ok = False
                        conn.close()
                        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
                    took = time.monotonic() - t0
                    n += 1
                    with lock:
                        stats["answered" if ok else "failed"] += 1
                        stats["slowest"] = max(stats["slowest"], took)
                conn.close()

            threads = [threading.Thread(target=load, args=(i,)) for i in range(4)]
            try:
                for t in threads:
                    t.start()
                wait_until(lambda: stats["answered"] > 200, "load to run")
                self.redis.kill()
                before = stats["answered"]
                wait_until(lambda: stats["answered"] > before + 500, "answers with Redis dead")
                self.redis.start()
                wait_until(lambda: server.metric("ratekeeper_redis_breaker_state") == 0 and
                           cli(self.redis.port, "DBSIZE") not in ("", "0"), "the service to use Redis again")
            finally:
                stop.set()
                for t in threads:
                    t.join()
                server.stop()
            self.assertEqual(stats["failed"], 0, stats)
            self.assertLess(stats["slowest"], within(timeout), stats)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class ServerDir(Server):
    """A server over a directory of rules files."""

    def __init__(self, rules_dir, redis_url, extra=()):
        super().__init__(None, redis_url, extra, config=rules_dir, threads=None)


class ClusterFailoverTest(unittest.TestCase):
    def test_a_primary_failing_over_is_survived(self):
        cluster = Cluster()
        d = tempfile.mkdtemp(prefix="rk-rules-")
        try:
            with open(os.path.join(d, "r.yaml"), "w") as f:
                f.write(WINDOW_RULES)
            server = ServerDir(d, cluster.url(), ["--redis-timeout", "200ms"])
            try:
                users = ["u%d" % i for i in range(30)]  # spread over all three primaries' slots
                for u in users:
                    status, body = server.check(u)
                    self.assertEqual(status, 200)
                    self.assertNotIn("fallback", body["statuses"][0], body)
                # Which of the others is the killed primary's replica, then the kill, and the takeover an operator
                # (or the cluster itself, given time) makes.
                replica_port = cluster.replica_of(cluster.nodes[0])
                cluster.nodes[0].kill()
                cli(replica_port, "CLUSTER", "FAILOVER", "TAKEOVER")

                def all_from_redis():
                    for u in users:
                        _, body = server.check(u)
                        if "fallback" in body["statuses"][0]:
                            return False
                    return True
                wait_until(all_from_redis, "every key to be served by the cluster again", 30)
                # Counted across the failover: each user has spent at least 2 of 1000 (more for those on the
                # failed primary, whose replica may have lost the last writes, and whose retries in the interim
                # fell open).
                _, body = server.check(users[0])
                self.assertLessEqual(body["statuses"][0]["limit_remaining"], 998)
            finally:
                server.stop()
        finally:
            cluster.close()
            shutil.rmtree(d, ignore_errors=True)


BATCHED_RULES = """
domain: shared
sharing: batched
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: fixed_window}
"""

# 60 values whose CRC-16s agree in the slot's 14 bits: of one length, so that the keys of any rule that end with them
# share one slot where a key is hashed whole (CRC-16 is linear: the rule's hash before them changes nothing). Found by
# search, as a client would (tests/store/redis/remote_keys_test.cc makes its own).
CRC_VALUES = [
    "fpzYSaaa", "LsHnHfVk", "0PInPdfV", "Nczjza_0", "o6Xjmb-T", "1cm2YdaZ", "4Mu0DepM", "nAXyrnRD", "r_n6adEW",
    "69p9_aZD", "V2xaFdrA", "ld7W5nvG", "oHq8Ke_Z", "5ZLv7c_4", "4MNfjfwG", "AN1m7ayv", "i75cwdx_", "3JjkqiIZ",
    "v3K7odN5", "z8i2tdGv", "bXLfTbbA", "GAHOhbn8", "dJAizhze", "L7rPHbPo", "NK29haTi", "Ctf6oayQ", "mH7WPayP",
    "QVx4QfaJ", "m50fUdID", "lO3U6bnZ", "UfLHJbsa", "lCYevbXi", "v8nledh5", "3frPFdhR", "eJysFgoB", "Lp4qjdVr",
    "5NZCTbBC", "nEHrSa84", "6C5MhhRF", "4pyi_eI5", "qXJ-Sbmg", "5g2dCbk0", "NFnZ1bMm", "rDt6xew4", "9lJZ4dd6",
    "iaEkIbIh", "F-uYHakF", "72crmdav", "w2cI-bS8", "QFNxjbS_", "Mdpjgd35", "l6ielnge", "W-NVRcnO", "Jtphfdng",
    "UxoR-avu", "TG7nAeP5", "evIXObXd", "cA-jdcLd", "-DwxvaxP", "XviyGf26"]


def crc16(data):
    """Redis Cluster's CRC-16 (XMODEM)."""
    crc = 0
    for b in data.encode():
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


class ClusterSlotsTest(unittest.TestCase):
    """Redis Cluster places a key by the first {...} in its name, and descriptor values are part of the name: every
    key, an exact domain's and a batched domain's alike, leads with a tag that no value can shape. Values that
    would pile keys onto one slot (and one node) without it spread over every primary, in as many slots as plain
    values."""

    FAMILIES = {
        "plain": ["u%d" % i for i in range(60)],
        "opens a tag": ["{same}%d" % i for i in range(60)],
        "ends the tag": ["x}%d" % i for i in range(60)],
        "braces": ["{%d" % i for i in range(20)] + ["{}%d" % i for i in range(20)] + ["}{%d" % i for i in range(20)],
        "one CRC slot": CRC_VALUES,
    }

    def test_values_that_would_shape_a_hash_tag_spread_over_every_primary(self):
        self.assertEqual(len({crc16("rk:{}0123456789abcdef:4:user8:" + v) & 16383 for v in CRC_VALUES}), 1)
        self.assertEqual(len({crc16("rk:{}fedcba9876543210:4:user8:" + v) & 16383 for v in CRC_VALUES}), 1)
        cluster = Cluster()
        d = tempfile.mkdtemp(prefix="rk-rules-")
        try:
            with open(os.path.join(d, "r.yaml"), "w") as f:
                f.write(WINDOW_RULES)
            with open(os.path.join(d, "b.yaml"), "w") as f:
                f.write(BATCHED_RULES)
            server = ServerDir(d, cluster.url(), ["--redis-timeout", "500ms"])
            values = [v for family in self.FAMILIES.values() for v in family]
            try:
                for domain in ("api", "shared"):
                    for v in values:
                        status, body = server.check(v, domain=domain)
                        self.assertEqual(status, 200, body)
                        self.assertNotIn("fallback", body["statuses"][0], body)
                primaries = [n for n in cluster.nodes if "role:master" in cli(n.port, "INFO", "replication")]
                self.assertEqual(len(primaries), 3)

                def where():
                    """{(value, kind): (key, port of the primary holding it)} for each exact key ("exact": the key
                    ends with the value, "<length>:<value>") and batched counter ("batched": then "c"; snapshots
                    left out)."""
                    found = {}
                    for n in primaries:
                        for k in cli(n.port, "--scan", "--pattern", "rk:*").split():
                            for v in values:
                                entry = ":%d:%s" % (len(v), v)
                                if entry in k:
                                    tail = k[k.index(entry) + len(entry):]
                                    if tail == "" or tail.endswith("c"):
                                        found[(v, "exact" if tail == "" else "batched")] = (k, n.port)
                    return found
                # A batched domain's counters reach Redis with the batch after the hit.
                wait_until(lambda: len(where()) == 2 * len(values), "every key in Redis")
            finally:
                server.stop()
            held = where()
            for family, vs in self.FAMILIES.items():
                for kind in ("exact", "batched"):
                    with self.subTest(family=family, kind=kind):
                        keys = [held[(v, kind)] for v in vs if (v, kind) in held]
                        self.assertEqual(len(keys), len(vs))
                        slots = {int(cli(primaries[0].port, "CLUSTER", "KEYSLOT", k)) for k, _ in keys}
                        # 60 keys over 16384 slots: all but a few apart, as for plain values; on every primary
                        self.assertGreater(len(slots), len(vs) - 5, slots)
                        self.assertEqual(len({port for _, port in keys}), 3)
        finally:
            cluster.close()
            shutil.rmtree(d, ignore_errors=True)


def start_sentinel(d, i, primary_port, quorum=2, certs=None, tls_port=None):
    """A redis-sentinel monitoring `mymaster` at primary_port, ready: (port, process, log). With `certs`, it is asked
    over TLS on tls_port too, speaks TLS to Redis (tls-replication), and names the primary "localhost"."""
    port = free_port()
    conf = os.path.join(d, "s%d.conf" % i)
    with open(conf, "w") as f:
        f.write("port %d\nbind 127.0.0.1\ndir %s\n" % (port, d))
        if certs:
            f.write("sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n")
        f.write("sentinel monitor mymaster %s %d %d\n"
                "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n"
                % ("localhost" if certs else "127.0.0.1", primary_port, quorum))
        if certs:
            f.write("tls-port %d\ntls-replication yes\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                    "tls-auth-clients optional\n" % (tls_port, certs.file("server.crt"), certs.file("server.key"),
                                                     certs.file("ca.crt")))
    log = open(os.path.join(d, "s%d.log" % i), "w")
    proc = subprocess.Popen([shutil.which("redis-sentinel") or "/usr/bin/redis-sentinel", conf], stdout=log,
                            stderr=subprocess.STDOUT)
    wait_until(lambda: "num-other-sentinels" in cli(port, "SENTINEL", "MASTER", "mymaster"), "sentinel %d" % port)
    return port, proc, log


class SentinelTest(unittest.TestCase):
    def test_the_service_follows_a_sentinel_failover(self):
        primary = Redis()
        replica = Redis(["--replicaof", "127.0.0.1", str(primary.port)])
        wait_until(lambda: "master_link_status:up" in cli(replica.port, "INFO", "replication"), "replication")
        sentinels = []
        d = tempfile.mkdtemp(prefix="rk-sentinel-")
        try:
            for i in range(3):
                sentinels.append(start_sentinel(d, i, primary.port))
            with open(os.path.join(d, "r.yaml"), "w") as f:
                f.write(WINDOW_RULES)
            url = "redis+sentinel://" + ",".join("127.0.0.1:%d" % p for p, _, _ in sentinels) + "/mymaster"
            server = ServerDir(d, url, ["--redis-timeout", "300ms"])
            try:
                status, body = server.check("s")
                self.assertEqual(status, 200)
                self.assertNotIn("fallback", body["statuses"][0], body)
                wait_until(lambda: cli(sentinels[0][0], "SENTINEL", "FAILOVER", "mymaster") == "OK", "a failover")
                wait_until(lambda: cli(sentinels[0][0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
                           .endswith(str(replica.port)), "the replica to be the primary", 30)

                # Until the old primary has been told it is a replica, a decision may still be written there (and
                # lost at its resync): the service has followed once a decision's key lands on the new primary.
                def on_new_primary():
                    _, b = server.check("s")
                    return ("fallback" not in b["statuses"][0] and
                            cli(replica.port, "--scan", "--pattern", "rk:*") != "")
                wait_until(on_new_primary, "decisions from the new primary", 30)
            finally:
                server.stop()
        finally:
            for _, proc, log in sentinels:
                proc.kill()
                proc.wait()
                log.close()
            replica.close()
            primary.close()
            shutil.rmtree(d, ignore_errors=True)


class Trickler:
    """A loopback server that accepts every connection and, once it has been sent anything, answers a reply that
    never ends one byte every `every` seconds, or with every=None nothing at all: the slow peer a hostile or broken
    Sentinel or Redis can be. What it is sent is read and dropped."""

    def __init__(self, every):
        self.every = every
        self.accepted = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self):
        trickle = b"*2\r\n$1000000\r\n" + b"a" * 1000000
        peers = {}  # socket -> bytes of the trickle sent, None until it has asked something
        last = time.monotonic()
        while not self.stopping.is_set():
            readable, _, _ = select.select([self.listener, *peers], [], [], 0.01)
            for s in readable:
                if s is self.listener:
                    peer, _ = s.accept()
                    peers[peer] = None
                    self.accepted += 1
                    continue
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    s.close()
                    del peers[s]
                elif peers[s] is None:
                    peers[s] = 0
            if self.every is None or time.monotonic() - last < self.every:
                continue
            last = time.monotonic()
            for s, at in peers.items():
                if at is not None and at < len(trickle):
                    try:
                        s.send(trickle[at:at + 1])
                        peers[s] = at + 1
                    except OSError:
                        pass
        for s in peers:
            s.close()
        self.listener.close()

    def close(self):
        self.stopping.set()
        self.thread.join()


class TricklingPeerTest(unittest.TestCase):
    """An attack: a Sentinel or a Redis that answers a byte at a time, or never, must cost each decision no more
    than the Redis timeout (the domain's failure policy answers), and must not keep SIGTERM from stopping the
    server. Bounds are within() the configured timeout, so that they hold on a busy machine."""

    TIMEOUT = 0.1

    def attack(self, url_of):
        for every in (0.02, None):
            peer = Trickler(every)
            d = tempfile.mkdtemp(prefix="rk-rules-")
            what = "a peer sending a byte every %s s" % every
            try:
                with open(os.path.join(d, "r.yaml"), "w") as f:
                    f.write(POLICY_RULES % ("api", "fail_open"))
                server = ServerDir(d, url_of(peer.port), ["--redis-timeout", "%dms" % (self.TIMEOUT * 1000)])
                try:
                    for i in range(10):
                        t0 = time.monotonic()
                        status, body = server.check("t%d" % i)
                        took = time.monotonic() - t0
                        self.assertEqual(status, 200, (what, body))
                        self.assertEqual(body["statuses"][0].get("fallback"), "fail_open", (what, body))
                        self.assertLess(took, within(self.TIMEOUT), "%s: decision %d took %.3f s" % (what, i, took))
                        time.sleep(0.05)
                    self.assertGreaterEqual(peer.accepted, 1, what)
                finally:
                    t0 = time.monotonic()
                    server.stop()  # fails if SIGTERM does not stop it
                    took = time.monotonic() - t0
                self.assertLess(took, 30 * self.TIMEOUT, "%s: stopping on SIGTERM took %.3f s" % (what, took))
            finally:
                peer.close()
                shutil.rmtree(d, ignore_errors=True)

    def test_a_trickling_or_silent_sentinel_costs_each_decision_its_timeout_and_sigterm_stops_the_server(self):
        self.attack(lambda port: "redis+sentinel://127.0.0.1:%d/mymaster" % port)

    def test_past_a_trickling_sentinel_the_next_one_names_the_primary(self):
        primary = Redis()
        peer = Trickler(0.02)
        d = tempfile.mkdtemp(prefix="rk-sentinel-")
        sentinel = None
        try:
            sentinel = start_sentinel(d, 0, primary.port, quorum=1)
            with open(os.path.join(d, "r.yaml"), "w") as f:
                f.write(POLICY_RULES % ("api", "fail_open"))
            url = "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/mymaster" % (peer.port, sentinel[0])
            server = ServerDir(d, url, ["--redis-timeout", "%dms" % (self.TIMEOUT * 1000)])
            try:
                def from_redis():
                    t0 = time.monotonic()
                    _, body = server.check("past-the-trickler")
                    took = time.monotonic() - t0
                    self.assertLess(took, within(self.TIMEOUT), "a decision took %.3f s" % took)
                    return "fallback" not in body["statuses"][0]
                wait_until(from_redis, "decisions from the primary the second sentinel names")
                self.assertGreaterEqual(peer.accepted, 1)  # the trickler was asked first
                self.assertNotEqual(cli(primary.port, "--scan", "--pattern", "rk:*"), "")
            finally:
                server.stop()
        finally:
            if sentinel:
                sentinel[1].kill()
                sentinel[1].wait()
                sentinel[2].close()
            peer.close()
            primary.close()
            shutil.rmtree(d, ignore_errors=True)

    def test_a_trickling_or_silent_redis_costs_each_decision_its_timeout_and_sigterm_stops_the_server(self):
        self.attack(lambda port: "redis://127.0.0.1:%d" % port)


class SettingsFileTest(unittest.TestCase):
    def test_redis_from_a_settings_file_and_the_command_line_wins(self):
        redis = Redis()
        d = tempfile.mkdtemp(prefix="rk-settings-")
        try:
            settings = os.path.join(d, "settings.yaml")
            with open(settings, "w") as f:
                f.write("redis: redis://127.0.0.1:%d\nredis-clock: local\nredis-timeout: 250ms\n"
                        "redis-failure: fail_closed\nadmin: 127.0.0.1:%d\nshadow-mode: false\n"
                        % (redis.port, free_port()))
            server = Server(POLICY_RULES % ("api", "fail_closed"), None, ["--settings", settings])
            try:  # Server passes its own --admin after the file's: it answered /readyz there, so the flag won
                self.assertEqual([server.check("from-settings")[0] for _ in range(3)], [200, 200, 429])
                keys = cli(redis.port, "--scan", "--pattern", "rk:*")
                self.assertEqual(len(keys.split()), 1, keys)  # the state is in Redis, not in memory
            finally:
                server.stop()
        finally:
            redis.close()
            shutil.rmtree(d, ignore_errors=True)

    def test_the_example_settings_file_starts_the_service(self):
        example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "systemd",
                               "settings.yaml")
        server = Server(WINDOW_RULES, None, ["--settings", example])  # its ports overridden by Server's own
        try:
            self.assertEqual(server.check("example")[0], 200)
        finally:
            server.stop()

    def test_each_kind_of_bad_settings_file_is_refused_with_its_line(self):
        d = tempfile.mkdtemp(prefix="rk-settings-")
        try:
            rules = os.path.join(d, "r.yaml")
            with open(rules, "w") as f:
                f.write(WINDOW_RULES)
            for text, expected in [
                ("redis: redis://127.0.0.1:1\ncolour: blue\n", "settings.yaml:2:1: unknown setting 'colour'"),
                ("redis-timeout: forever\n", "settings.yaml:1:16: redis-timeout: 'forever'"),
                ("redis-clock: sundial\n", "settings.yaml:1:14: redis-clock: 'sundial'"),
                ("redis-packed-hashes: 16777217\n",
                 "settings.yaml:1:22: redis-packed-hashes: '16777217' is not a whole number from 0 to 16777216"),
                ("redis-packed-hashes: -1\n", "redis-packed-hashes: '-1' is not a whole number from 0 to 16777216"),
                ("redis: http://127.0.0.1:6379\n", "--redis"),
                ("shadow-mode: maybe\n", "settings.yaml:1:14: shadow-mode: 'maybe' is not true or false"),
                ("redis: [a, b]\n", "settings.yaml:1:8: setting 'redis' takes a single value"),
                ("- redis\n", "a settings file is a mapping"),
                ("redis: [unclosed\n", "settings.yaml:"),
                ("settings: other.yaml\n", "'settings' is not a setting"),
                (None, "--settings: cannot read"),
            ]:
                settings = os.path.join(d, "settings.yaml")
                if os.path.exists(settings):
                    os.remove(settings)
                if text is not None:
                    with open(settings, "w") as f:
                        f.write(text)
                out = subprocess.run([BINARY, "serve", "--config", rules, "--http", "127.0.0.1:0", "--admin",
                                      "127.0.0.1:0", "--settings", settings], capture_output=True, text=True,
                                     timeout=10)
                self.assertEqual(out.returncode, 2, (text, out.stderr))
                self.assertIn(expected, out.stderr, text)
        finally:
            shutil.rmtree(d, ignore_errors=True)


TLS_RULES = """
domain: api
redis_failure: fail_closed
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: fixed_window}
"""


class TlsTest(unittest.TestCase):
    """rediss:// against Redis, a Cluster and Sentinel on the test's certificates; a refused handshake."""

    @classmethod
    def setUpClass(cls):
        cls.certs = Certs()

    @classmethod
    def tearDownClass(cls):
        cls.certs.close()

    def tls_flags(self, client=False):
        """The CA, and a timeout a TLS connection takes well within under a sanitizer on a loaded machine."""
        flags = ["--redis-tls-ca", self.certs.file("ca.crt"), "--redis-timeout", "3s"]
        if client:
            flags += ["--redis-tls-cert", self.certs.file("client.crt"),
                      "--redis-tls-key", self.certs.file("client.key")]
        return flags

    def assert_decided_by_redis(self, server, redis_port, value):
        status, body = server.check(value)
        self.assertEqual(status, 200, body)
        self.assertNotIn("fallback", body["statuses"][0], body)
        self.assertNotEqual(cli(redis_port, "--scan", "--pattern", "rk:*"), "")

    def test_a_tls_cluster_naming_its_nodes_by_host_name_with_a_client_certificate_decides(self):
        # CLUSTER SLOTS names the nodes "localhost": resolved, and checked against the certificate's DNS name.
        cluster = Cluster(replicas=0, certs=self.certs,
                          extra=["--cluster-announce-hostname", "localhost",
                                 "--cluster-preferred-endpoint-type", "hostname"])
        try:
            server = Server(TLS_RULES, cluster.url(), self.tls_flags(client=True))
            try:
                for i in range(20):  # over every primary
                    status, body = server.check("v%d" % i)
                    self.assertNotIn("fallback", body["statuses"][0], body)
                self.assertTrue(all(cli(n.port, "--scan", "--pattern", "rk:*") for n in cluster.nodes))
                self.assertIn("localhost", cli(cluster.nodes[0].port, "CLUSTER", "SLOTS"))
                self.assertIn("rediss+cluster://", server.output())
            finally:
                server.stop()
        finally:
            cluster.close()

    def test_a_tls_sentinel_naming_the_primary_by_host_name_decides(self):
        primary = Redis(certs=self.certs)
        d = tempfile.mkdtemp(prefix="rk-sentinel-")
        sentinel = None
        try:
            tls_port = free_port()
            sentinel = start_sentinel(d, 0, primary.tls_port, quorum=1, certs=self.certs, tls_port=tls_port)
            server = Server(TLS_RULES, "rediss+sentinel://localhost:%d/mymaster" % tls_port,
                            self.tls_flags())
            try:
                self.assert_decided_by_redis(server, primary.port, "s")
                self.assertTrue(cli(sentinel[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster").startswith(
                    "localhost"))
            finally:
                server.stop()
            # Trusting another CA, the sentinel's certificate is refused: counted, and the reason reaches the answer.
            server = Server(TLS_RULES, "rediss+sentinel://localhost:%d/mymaster" % tls_port,
                            ["--redis-tls-ca", self.certs.file("other-ca.crt"), "--redis-timeout", "3s"])
            try:
                status, body = server.check("s")
                self.assertEqual(status, 429, body)
                self.assertIn("self-signed certificate", body["statuses"][0].get("store_error", ""), body)
                self.assertGreaterEqual(server.metric("ratekeeper_redis_tls_handshake_failures_total"), 1)
            finally:
                server.stop()
        finally:
            if sentinel:
                sentinel[1].kill()
                sentinel[1].wait()
                sentinel[2].close()
            primary.close()
            shutil.rmtree(d, ignore_errors=True)

    def test_an_expired_certificate_is_refused_in_time_logged_once_with_its_reason_and_counted(self):
        redis = Redis(certs=self.certs, cert="expired.crt")
        try:
            timeout = 1.0  # the refusal comes well before it, even under a sanitizer: the log then says why
            server = Server(TLS_RULES, "rediss://localhost:%d" % redis.tls_port,
                            ["--redis-tls-ca", self.certs.file("ca.crt"), "--redis-timeout", "1s"])
            try:
                for i in range(5):
                    started = time.monotonic()
                    status, body = server.check("e")
                    self.assertLess(time.monotonic() - started, within(timeout))
                    self.assertEqual(status, 429, body)  # fail_closed answered
                    self.assertIn("fallback", body["statuses"][0], body)
                wait_until(lambda: server.metric("ratekeeper_redis_tls_handshake_failures_total") >= 1,
                           "the failed handshake to be counted")
                log = server.output()
                self.assertEqual(log.count("certificate has expired"), 1, log)
            finally:
                server.stop()
        finally:
            redis.close()


class DocsTlsExampleTest(unittest.TestCase):
    """docs/redis.md's TLS example, as written (its port moved to a free one): certificates made, Redis started with
    TLS and a password, ratekeeper serve on rediss:// with the password file, deciding through Redis."""

    def example(self):
        doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "redis.md")
        with open(doc) as f:
            text = f.read()
        block = text.split("<!-- docs-test: by tests/integration/redis_test.py -->\n```sh\n", 1)[1].split("```", 1)[0]
        return block.replace("\\\n", "").splitlines()

    def test_the_tls_example_runs(self):
        d = tempfile.mkdtemp(prefix="rk-docs-tls-")
        ports = set()
        while len(ports) < 3:  # a port just freed may be handed out twice
            ports.add(free_port())
        tls_port, http_port, admin_port = sorted(ports)
        os.mkdir(os.path.join(d, "examples"))  # the example's --config, as in a clone
        here = os.path.dirname(os.path.abspath(__file__))
        shutil.copy(os.path.join(here, "..", "..", "examples", "rules.yaml"), os.path.join(d, "examples"))
        procs = []
        log = open(os.path.join(d, "serve.log"), "w+")
        try:
            for line in self.example():
                line = line.replace("6380", str(tls_port))
                if line.startswith("ratekeeper serve"):
                    args = shlex.split(line)[2:] + ["--http", "127.0.0.1:%d" % http_port,
                                                    "--admin", "127.0.0.1:%d" % admin_port, "--drain", "0s"]
                    procs.append(subprocess.Popen([BINARY, "serve", *args], cwd=d, stdout=log, stderr=log))
                elif line.endswith("&"):
                    procs.append(subprocess.Popen(["bash", "-c", "exec " + line[:-1]], cwd=d, stdout=log,
                                                  stderr=log))
                else:
                    subprocess.run(["bash", "-c", line], cwd=d, check=True, capture_output=True, timeout=60)
            def decided_by_redis():
                conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
                try:
                    entries = [{"key": "api_key", "value": "d"}]
                    body = json.dumps({"domain": "edge", "descriptors": [{"entries": entries}]})
                    conn.request("POST", "/v1/check", body=body, headers={"Content-Type": "application/json"})
                    answer = json.loads(conn.getresponse().read())
                    return "fallback" not in answer["statuses"][0]
                finally:
                    conn.close()
            try:
                wait_until(decided_by_redis, "a decision through the example's Redis")
            except AssertionError:
                log.flush()
                log.seek(0)
                raise AssertionError("no decision through the example's Redis; its output:\n" + log.read())
        finally:
            for proc in reversed(procs):
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=15)
            log.close()
            shutil.rmtree(d, ignore_errors=True)


class HostNameTest(unittest.TestCase):
    def test_a_name_moved_to_another_address_is_followed_at_the_next_connection(self):
        """A failover that moves a DNS name, played with /etc/hosts: Redis A on 127.0.0.1 and B on 127.0.0.2, both on
        one port; the name first resolves to A alone, then to B as well, and A dies. Other processes read
        /etc/hosts meanwhile: our lines are only appended, and taken off at the end by one write of the same
        leading bytes and a truncation, so that no reader ever sees the file empty."""
        if not os.access("/etc/hosts", os.W_OK):
            self.skipTest("/etc/hosts is not writable here")
        name = "rk-moving-%d.test" % os.getpid()

        def add(address):
            with open("/etc/hosts", "a") as f:
                f.write("%s %s\n" % (address, name))

        def remove():
            with open("/etc/hosts", "r+") as f:
                kept = "".join(l for l in f.read().splitlines(True) if not l.rstrip("\n").endswith(" " + name))
                f.seek(0)
                f.write(kept)
                f.truncate()

        a = Redis()
        b = Redis(bind="127.0.0.2", port=a.port)
        try:
            add("127.0.0.1")
            server = Server(WINDOW_RULES, "redis://%s:%d" % (name, a.port), ["--redis-timeout", "3s"])
            try:
                status, body = server.check("m")
                self.assertNotIn("fallback", body["statuses"][0], body)
                self.assertNotEqual(cli(a.port, "--scan", "--pattern", "rk:*"), "")
                add("127.0.0.2")  # unknown when the name was first resolved
                a.kill()

                def on_b():
                    return "fallback" not in server.check("m")[1]["statuses"][0]
                wait_until(on_b, "decisions from the name's new address")
                self.assertNotEqual(subprocess.run([REDIS_CLI, "-h", "127.0.0.2", "-p", str(b.port), "--scan",
                                                    "--pattern", "rk:*"], capture_output=True, text=True,
                                                   timeout=10).stdout.strip(), "")
            finally:
                server.stop()
        finally:
            remove()
            a.close()
            b.close()


class SecretTest(unittest.TestCase):
    def test_the_password_file_wins_and_no_password_is_ever_shown(self):
        """The password of a file, and a wrong one in the URL, appear nowhere: log, metrics, /v1/rules, errors."""
        password, url_password = "pw-from-file-5f2a9c", "pw-in-url-81d3e7"
        redis = Redis(["--requirepass", password])
        d = tempfile.mkdtemp(prefix="rk-secret-")
        try:
            path = os.path.join(d, "password")
            with open(path, "w") as f:
                f.write(password + "\n")
            url = "redis://:%s@127.0.0.1:%d" % (url_password, redis.port)
            server = Server(WINDOW_RULES, url, ["--redis-password-file", path, "--log-level", "debug",
                                                "--redis-timeout", "3s"])
            try:
                status, body = server.check("p")
                self.assertNotIn("fallback", body["statuses"][0], body)
                seen = [server.output()]
                for path_ in ("/metrics", "/v1/rules", "/v1/admin/hot-keys"):
                    seen.append(server.request("GET", path_, admin=True)[2].decode())
                # A refused AUTH: the error the log shows must not carry the password either.
                cli(redis.port, "-a", password, "--no-auth-warning", "CONFIG", "SET", "requirepass", "another")
                cli(redis.port, "-a", "another", "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal")
                wait_until(lambda: "fallback" in server.check("p")[1]["statuses"][0], "AUTH to be refused")
                wait_until(lambda: "the shared store is not answering" in server.output(), "the log line")
                seen.append(server.output())
            finally:
                server.stop()
            for text in seen:
                self.assertNotIn(password, text)
                self.assertNotIn(url_password, text)
        finally:
            redis.close()
            shutil.rmtree(d, ignore_errors=True)


class BadRedisFlagsTest(unittest.TestCase):
    def test_bad_redis_urls_and_flags_are_refused_with_a_message(self):
        d = tempfile.mkdtemp(prefix="rk-rules-")
        certs = Certs()
        ca, cert, key = certs.file("ca.crt"), certs.file("client.crt"), certs.file("client.key")
        missing, empty = os.path.join(d, "missing"), os.path.join(d, "empty")
        open(empty, "w").close()
        try:
            path = os.path.join(d, "r.yaml")
            with open(path, "w") as f:
                f.write(WINDOW_RULES)
            for args, expected in [
                (["--redis", "http://127.0.0.1:6379"], "--redis"),
                (["--redis", "redis://127.0.0.1:99999"], "--redis"),
                (["--redis", "redis://127.0.0.1:1", "--redis-clock", "sundial"], "--redis-clock: 'sundial'"),
                (["--redis", "redis://127.0.0.1:1", "--redis-failure", "panic"], "--redis-failure: 'panic'"),
                (["--redis", "redis://127.0.0.1:1", "--redis-timeout", "0ms"], "--redis-timeout: '0ms'"),
                (["--redis", "redis://127.0.0.1:1", "--redis-tls-ca", ca], "--redis-tls-ca: given with a plain redis"),
                (["--redis", "rediss://127.0.0.1:1", "--redis-tls-cert", cert],
                 "--redis-tls-cert: '%s' needs --redis-tls-key" % cert),
                (["--redis", "rediss://127.0.0.1:1", "--redis-tls-key", key],
                 "--redis-tls-key: '%s' needs --redis-tls-cert" % key),
                (["--redis", "rediss://127.0.0.1:1", "--redis-tls-ca", missing],
                 "--redis-tls-ca: '%s' cannot" % missing),
                (["--redis", "rediss://127.0.0.1:1", "--redis-tls-ca", empty], "--redis-tls-ca: '%s' cannot" % empty),
                (["--redis", "redis://127.0.0.1:1", "--redis-password-file", empty],
                 "--redis-password-file: '%s' is empty" % empty),
                (["--redis-password-file", empty], "--redis-password-file: '%s' given without --redis" % empty),
                (["--redis", "redis://127.0.0.1:1", "--redis-password-file", missing],
                 "--redis-password-file: '%s' cannot be read" % missing),
                (["--redis", "redis://127.0.0.1:1", "--redis-batch-interval", "500us"], "--redis-batch-interval: '500us'"),
                (["--redis", "redis://127.0.0.1:1", "--redis-batch-interval", "11s"], "--redis-batch-interval: '11s'"),
                (["--redis", "redis://127.0.0.1:1", "--redis-spin", "2ms"], "--redis-spin: '2ms' is not a duration from 0 to 1ms"),
                (["--redis", "redis://127.0.0.1:1", "--redis-spin", "-1us"], "--redis-spin: '-1us'"),
            ]:
                out = subprocess.run([BINARY, "serve", "--config", path, "--http", "127.0.0.1:0", "--admin",
                                      "127.0.0.1:0", *args], capture_output=True, text=True, timeout=10)
                self.assertEqual(out.returncode, 2, (args, out.stderr))
                self.assertIn(expected, out.stderr, args)
        finally:
            certs.close()
            shutil.rmtree(d, ignore_errors=True)


# ctest runs the classes in groups, a test each (tests/CMakeLists.txt: integration.redis.<group>), so that ctest -j2
# runs them side by side; every class is in exactly one group.
GROUPS = {
    "sharing": ["SharedLimitTest", "ConcurrencyLeaseTest", "ReservationTest"],
    "cluster": ["ClusterFailoverTest", "ClusterSlotsTest"],
    "failover": ["FailureTest", "SentinelTest", "TricklingPeerTest"],
    "config": ["SettingsFileTest", "TlsTest", "DocsTlsExampleTest", "HostNameTest", "SecretTest", "BadRedisFlagsTest"],
}

if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    classes = sorted(n for n, c in list(globals().items())
                     if isinstance(c, type) and issubclass(c, unittest.TestCase) and c.__module__ == "__main__")
    grouped = sorted(n for names in GROUPS.values() for n in names)
    if classes != grouped:
        sys.exit("redis_test.py: GROUPS must hold every test class once: %s in no group, %s not a class (or twice)"
                 % (sorted(set(classes) - set(grouped)), sorted(set(grouped) - set(classes)) or
                    sorted(n for n in grouped if grouped.count(n) > 1)))
    # A group's name: its classes; else unittest's own arguments (a class, a test, nothing for all).
    if len(sys.argv) == 2 and sys.argv[1] in GROUPS:
        sys.argv[1:] = GROUPS[sys.argv[1]]
    unittest.main(verbosity=2)
