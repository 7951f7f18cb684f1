#!/usr/bin/python3
"""Rules over xDS (docs/envoy-gateway.md): the control plane of tests/support/xds_plane.py (Python's grpcio) pushes
RateLimitConfig resources to the real `ratekeeper serve --xds-server`, which decides over gRPC as Envoy asks it.
Run by ctest: xds_test.py BINARY PROTO_DIR MAKE_CERTS.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from harness import free_port, stop, wait_until  # noqa: E402  (tests/support: the shared helpers)
from xds_plane import TYPE, ControlPlane, config, generate  # noqa: E402  (tests/support: the control plane)

BINARY = PROTO_DIR = MAKE_CERTS = None
pb = None  # the generated modules, by short name (xds_plane.generate)
# Short waits, so that a reconnection takes a fraction of a second.
FAST = ["--xds-retry-interval", "100ms", "--xds-backoff-initial", "100ms", "--xds-backoff-max", "400ms"]


class Server:
    """`ratekeeper serve --xds-server ... --grpc ...` with its admin listener; the log in a temporary directory."""

    def __init__(self, extra):
        self.dir = tempfile.mkdtemp(prefix="rk-xds-")
        self.grpc_port, self.admin_port = free_port(), free_port()
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen([BINARY, "serve", "--drain", "0s", "--http", "127.0.0.1:%d" % free_port(),
                                      "--admin", "127.0.0.1:%d" % self.admin_port,
                                      "--grpc", "127.0.0.1:%d" % self.grpc_port, *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.status("/healthz") == 200, "the admin listener")
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        self.should = self.channel.unary_unary(
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
            request_serializer=pb.rls.RateLimitRequest.SerializeToString,
            response_deserializer=pb.rls.RateLimitResponse.FromString)
        self.health = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=pb.health.HealthCheckRequest.SerializeToString,
            response_deserializer=pb.health.HealthCheckResponse.FromString)

    def status(self, path):
        try:
            return urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.admin_port, path), timeout=10).status
        except urllib.error.HTTPError as e:
            return e.code

    def metrics(self):
        return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.admin_port, timeout=10).read().decode()

    def metric(self, line):
        """The value of the series that starts `line` (name and labels), or None."""
        for m in self.metrics().splitlines():
            if m.startswith(line + " "):
                return float(m.split(" ")[1])
        return None

    def decide(self, domain, *entries):
        r = pb.rls.RateLimitRequest(domain=domain)
        d = r.descriptors.add()
        for k, v in entries:
            d.entries.add(key=k, value=v)
        resp = self.should(r, timeout=10)
        return pb.rls.RateLimitResponse.Code.Name(resp.overall_code), resp.statuses[0]

    def close(self):
        if self.log.closed:
            return True, ""
        self.channel.close()
        stopped = stop(self.proc)
        self.log.seek(0)
        text = self.log.read()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return stopped, text


class XdsTest(unittest.TestCase):
    def setUp(self):
        self.cleanup = []

    def tearDown(self):
        for c in reversed(self.cleanup):
            c()

    def plane(self, **kw):
        cp = ControlPlane(**kw)
        self.cleanup.append(cp.stop)
        return cp

    def serve(self, cp_port, *extra):
        s = Server(["--xds-server", "127.0.0.1:%d" % cp_port, *FAST, *extra])
        self.cleanup.append(lambda: s.close())
        return s

    def ack(self, cp, version, configs, **kw):
        reply = cp.reply_to(cp.push(version, configs, **kw))
        self.assertFalse(reply.HasField("error_detail"), reply.error_detail.message)
        self.assertEqual(reply.version_info, version)
        return reply

    def nack(self, cp, configs, reason, last_version, **kw):
        reply = cp.reply_to(cp.push("bad", configs, **kw))
        self.assertTrue(reply.HasField("error_detail"))
        self.assertIn(reason, reply.error_detail.message)
        self.assertEqual(reply.version_info, last_version)
        return reply

    def test_pushes_acks_nacks_and_a_restarted_control_plane(self):
        cp = self.plane()
        s = self.serve(cp.port, "--xds-node-id", "rk-test", "--xds-node-metadata", '{"zone": "a", "n": 1}',
                       "--xds-headers", "Authorization=Bearer abc,x-team=edge")
        first = cp.next_request()
        self.assertEqual(first.node.id, "rk-test")
        self.assertEqual(first.node.metadata["zone"], "a")
        self.assertEqual(first.type_url, TYPE)
        self.assertEqual(first.version_info, "")
        self.assertEqual(cp.metadata[-1].get("authorization"), "Bearer abc")
        self.assertEqual(cp.metadata[-1].get("x-team"), "edge")
        # No rules yet: not ready, on HTTP and gRPC health alike.
        self.assertEqual(s.status("/readyz"), 503)
        self.assertEqual(s.health(pb.health.HealthCheckRequest(service=""), timeout=10).status,
                         pb.health.HealthCheckResponse.NOT_SERVING)

        v1 = [config("edge", "edge", ("foo", "", "MINUTE", 2), ("bar", "", "MINUTE", 5))]
        self.ack(cp, "1", v1)
        wait_until(lambda: s.status("/readyz") == 200, "ready after the first push")
        wait_until(lambda: s.health(pb.health.HealthCheckRequest(service=""), timeout=10).status ==
                   pb.health.HealthCheckResponse.SERVING, "gRPC health to follow")
        self.assertEqual([s.decide("edge", ("foo", "x"))[0] for _ in range(3)], ["OK", "OK", "OVER_LIMIT"])
        self.assertEqual(s.decide("edge", ("bar", "x"))[1].limit_remaining, 4)

        # foo changes, bar does not: bar's counter goes on, foo's starts again.
        self.ack(cp, "2", [config("edge", "edge", ("foo", "", "MINUTE", 3), ("bar", "", "MINUTE", 5))])
        self.assertEqual(s.decide("edge", ("bar", "x"))[1].limit_remaining, 3)
        self.assertEqual(s.decide("edge", ("foo", "x"))[1].limit_remaining, 2)

        # Pushes that cannot load: NACKed with the reason and the last good version; nothing changes.
        edge = ("foo", "", "MINUTE", 3)
        self.nack(cp, [config("blank", "", edge)], "domain: must not be empty", "2")
        self.nack(cp, [config("edge", "edge", ("foo", "", 42, 3))], "'42' is not a unit", "2")
        self.nack(cp, [config("a", "edge", edge), config("b", "edge", ("bar", "", "SECOND", 1))],
                  "domain 'edge' is already defined in xds:a", "2")
        self.nack(cp, v1, "is not " + TYPE, "2", type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster")
        self.nack(cp, [config("edge", "edge", ("foo", "", None, 0, {"rate_limit": {"unlimited": True, "unit": 1}}))],
                  "'unit' makes no sense with unlimited: true", "2")
        self.nack(cp, [], "not a RateLimitConfig", "2", raw=b"\xff\xff")
        self.assertEqual(s.decide("edge", ("bar", "x"))[1].limit_remaining, 2)
        self.assertEqual(s.metric('ratekeeper_xds_pushes_total{result="applied"}'), 2)
        self.assertEqual(s.metric('ratekeeper_xds_pushes_total{result="refused"}'), 6)
        self.assertEqual(s.metric('ratekeeper_xds_applied_version_info{version="2"}'), 1)
        self.assertEqual(s.metric("ratekeeper_xds_connected"), 1)

        # The control plane goes away: decisions go on with the rules in force, readiness too.
        cp.stop()
        wait_until(lambda: s.metric("ratekeeper_xds_connected") == 0, "the stream to be seen closed")
        self.assertEqual(s.decide("edge", ("bar", "x"))[1].limit_remaining, 1)
        self.assertEqual(s.status("/readyz"), 200)
        # Back on the same port, holding version 2: the first request carries it, so nothing is sent again.
        cp2 = self.plane(port=cp.port, snapshot=("2", v1))
        again = cp2.next_request()
        self.assertEqual(again.version_info, "2")
        self.assertEqual(again.node.id, "rk-test")
        self.assertEqual(again.response_nonce, "")
        wait_until(lambda: s.metric("ratekeeper_xds_connected") == 1, "connected again")
        self.ack(cp2, "3", [config("edge", "edge", ("bar", "", "MINUTE", 5))])
        self.assertEqual(s.decide("edge", ("bar", "x"))[1].limit_remaining, 0)  # the same rule: its count kept
        self.assertEqual(s.decide("edge", ("foo", "x"))[0], "OK")  # foo's rule is gone
        stopped, log = s.close()
        self.assertTrue(stopped, log)

    def test_ready_without_rules_and_merged_domains(self):
        cp = self.plane()
        s = self.serve(cp.port, "--ready-without-rules", "--merge-domains")
        wait_until(lambda: s.status("/readyz") == 200, "ready without rules, once every listener listens")
        self.assertEqual(s.decide("edge", ("foo", "x"))[0], "OK")  # no rules yet: every request is OK
        cp.next_request()
        self.ack(cp, "1", [config("a", "edge", ("foo", "", "HOUR", 1)), config("b", "edge", ("bar", "", "HOUR", 1))])
        for key in ("foo", "bar"):
            self.assertEqual([s.decide("edge", (key, "x"))[0] for _ in range(2)], ["OK", "OVER_LIMIT"])
        self.nack(cp, [config("a", "edge", ("foo", "", "HOUR", 1)), config("b", "edge", ("foo", "", "HOUR", 2))],
                  "the descriptor foo of domain 'edge' is already defined at xds:a", "1")

    def test_upstream_example_config_server(self):
        """envoyproxy/ratelimit's examples/xds-sotw-config-server: its snapshot (version 1, two domains) served to
        its default node id, "test-node-id", and decisions on it."""
        U = pb.conf
        rl = pb.conf.RateLimitConfig(name="rl", domain="rl")
        d = rl.descriptors.add(key="category", value="account")
        d.rate_limit.unit, d.rate_limit.requests_per_unit = U.MINUTE, 4
        d.rate_limit.replaces.add(name="bkthomps")
        d.rate_limit.replaces.add(name="fake_name")
        proxy = rl.descriptors.add(key="source_cluster", value="proxy")
        for value, limit, name, replaces in (("bkthomps", 2, "", "bkthomps"), ("mock", 1, "", ""),
                                             ("override", 2, "", "banned_limit"), ("fake", 2, "fake_name", "")):
            c = proxy.descriptors.add(key="destination_cluster", value=value)
            c.rate_limit.unit, c.rate_limit.requests_per_unit, c.rate_limit.name = U.MINUTE, limit, name
            if replaces:
                c.rate_limit.replaces.add(name=replaces)
        foo = rl.descriptors.add(key="foo")
        foo.rate_limit.unit, foo.rate_limit.requests_per_unit = U.MINUTE, 2
        for value, unit, limit, name, shadow in (("", U.MINUTE, 3, "", False), ("bkthomps", U.MINUTE, 1, "bkthomps",
                                                 False), ("banned", U.MINUTE, 0, "banned_limit", False)):
            c = foo.descriptors.add(key="bar", value=value)
            c.rate_limit.unit, c.rate_limit.requests_per_unit, c.rate_limit.name = unit, limit, name
        for value, unit, limit, shadow in (("", U.SECOND, 1, False), ("not-so-shady", U.MINUTE, 3, False),
                                           ("shady", U.MINUTE, 3, True)):
            c = foo.descriptors.add(key="baz", value=value, shadow_mode=shadow)
            c.rate_limit.unit, c.rate_limit.requests_per_unit = unit, limit
        foo.descriptors.add(key="bay").rate_limit.unlimited = True
        rl.descriptors.add(key="qux").rate_limit.unlimited = True
        mongo = config("mongo_cps", "mongo_cps", ("database", "users", "SECOND", 500),
                       ("database", "default", "SECOND", 500))
        cp = self.plane(snapshot=("1", [mongo, rl]), snapshot_node="test-node-id")
        s = self.serve(cp.port, "--xds-node-id", "test-node-id")
        ack = cp.next_request()
        ack = ack if ack.response_nonce else cp.next_request()
        self.assertEqual((ack.version_info, ack.HasField("error_detail")), ("1", False))
        wait_until(lambda: s.status("/readyz") == 200, "ready")
        self.assertEqual(s.decide("mongo_cps", ("database", "users"))[1].limit_remaining, 499)
        self.assertEqual([s.decide("rl", ("foo", "f1"), ("bar", "bkthomps"))[0] for _ in range(2)],
                         ["OK", "OVER_LIMIT"])
        self.assertEqual(s.decide("rl", ("foo", "f1"), ("bar", "banned"))[0], "OVER_LIMIT")
        self.assertEqual([s.decide("rl", ("foo", "f2"), ("baz", "shady"))[0] for _ in range(4)], ["OK"] * 4)
        self.assertEqual([s.decide("rl", ("qux", "q"))[0] for _ in range(5)], ["OK"] * 5)
        self.assertEqual([s.decide("rl", ("source_cluster", "proxy"), ("destination_cluster", "mock"))[0]
                          for _ in range(2)], ["OK", "OVER_LIMIT"])

    def test_mutual_tls_with_a_san_check(self):
        certs = tempfile.mkdtemp(prefix="rk-xds-certs-")
        self.cleanup.append(lambda: shutil.rmtree(certs, ignore_errors=True))
        subprocess.run(["sh", MAKE_CERTS, certs], check=True)

        def read(name):
            with open(os.path.join(certs, name), "rb") as f:
                return f.read()

        creds = grpc.ssl_server_credentials([(read("server.key"), read("server.crt"))],
                                            root_certificates=read("ca.crt"), require_client_auth=True)
        cp = self.plane(credentials=creds)
        tls = ["--xds-tls-ca", os.path.join(certs, "ca.crt"), "--xds-tls-cert", os.path.join(certs, "client.crt"),
               "--xds-tls-key", os.path.join(certs, "client.key")]
        s = self.serve(cp.port, *tls, "--xds-tls-san", "localhost")
        cp.next_request()
        self.ack(cp, "1", [config("edge", "edge", ("foo", "", "MINUTE", 1))])
        self.assertEqual([s.decide("edge", ("foo", "x"))[0] for _ in range(2)], ["OK", "OVER_LIMIT"])
        # A name the control plane's certificate does not carry: never connected, never subscribed.
        other = self.serve(cp.port, *tls, "--xds-tls-san", "control-plane.example")
        time.sleep(1.0)  # several attempts at 100 to 400 ms
        self.assertEqual(other.metric("ratekeeper_xds_connected"), 0)
        self.assertEqual(other.status("/readyz"), 503)
        self.assertEqual(len(cp.streams), 1)
        # No client certificate: the control plane refuses the handshake.
        bare = self.serve(cp.port, "--xds-tls-ca", os.path.join(certs, "ca.crt"))
        time.sleep(0.5)
        self.assertEqual(bare.metric("ratekeeper_xds_connected"), 0)
        self.assertEqual(len(cp.streams), 1)
        # docs/envoy-gateway.md's settings file, with this test's files and addresses: checked for the name
        # 127.0.0.1, the host of its --xds-server, which the server's certificate carries.
        with open(os.path.join(HERE, "..", "..", "docs", "envoy-gateway.md")) as f:
            doc = f.read()
        block = doc.split("<!-- docs-test: by tests/integration/xds_test.py -->\n```yaml\n")[1].split("```")[0]
        for name in ("crt", "key"):
            shutil.copy(os.path.join(certs, "client." + name), os.path.join(certs, "tls." + name))
        settings = os.path.join(certs, "settings.yaml")
        with open(settings, "w") as f:
            f.write(block.replace("envoy-gateway:18001", "127.0.0.1:%d" % cp.port).replace("/certs/", certs + "/")
                    .replace("0.0.0.0:8081", "127.0.0.1:%d" % free_port()))
        documented = Server(["--settings", settings, *FAST])
        self.cleanup.append(lambda: documented.close())
        wait_until(lambda: documented.status("/readyz") == 200, "ready without rules")  # once every listener listens
        wait_until(lambda: len(cp.streams) == 2, "the documented settings to subscribe")
        self.ack(cp, "1", [config("edge", "edge", ("foo", "", "MINUTE", 1))])
        self.assertEqual([documented.decide("edge", ("foo", "y"))[0] for _ in range(2)], ["OK", "OVER_LIMIT"])

    def test_redis_store(self):
        from redis_test import REDIS_SERVER, Redis
        if not os.path.exists(REDIS_SERVER):
            self.skipTest("no redis-server")
        redis = Redis()
        self.cleanup.append(redis.close)
        cp = self.plane()
        url = "redis://127.0.0.1:%d" % redis.port
        a, b = self.serve(cp.port, "--redis", url), None
        cp.next_request()
        b = self.serve(cp.port, "--redis", url)
        cp.next_request()
        rules = [config("edge", "edge", ("foo", "", "HOUR", 3))]
        for stream in cp.streams:  # both subscribed: each gets the push
            cp.nonce += 1
            r = cp.response("1", rules)
            stream.put(r)
            self.assertEqual(cp.reply_to(r.nonce).version_info, "1")
        # One limit shared through Redis by both servers.
        codes = [srv.decide("edge", ("foo", "x"))[0] for srv in (a, b, a, b)]
        self.assertEqual(codes, ["OK", "OK", "OK", "OVER_LIMIT"])

    def test_a_flood_of_pushes_does_not_stall_decisions(self):
        cp = self.plane()
        s = self.serve(cp.port)
        cp.next_request()
        self.ack(cp, "0", [config("edge", "edge", ("foo", "", "SECOND", 1000000))])
        done, stop_flag = [], threading.Event()  # (when a decision was answered, how long it took)

        def decide():
            while not stop_flag.is_set():
                t = time.perf_counter()
                s.decide("edge", ("foo", "x"))
                done.append((time.perf_counter(), time.perf_counter() - t))

        t = threading.Thread(target=decide)
        t.start()
        nonces = []
        try:
            time.sleep(1.0)  # decisions alone: the rate to compare with, on this machine at this moment
            flood = time.perf_counter()
            for i in range(30):  # 10 a second for 3 s, each a new set of 200 rules
                descriptors = [("k%d" % j, "", "MINUTE", 10 + i) for j in range(200)]
                nonces.append(cp.push(str(i + 1), [config("edge", "edge", ("foo", "", "SECOND", 1000000),
                                                          *descriptors)]))
                time.sleep(0.1)
            last = cp.reply_to(nonces[-1], seconds=30)
            flooded = time.perf_counter()
        finally:
            stop_flag.set()
            t.join()
        self.assertEqual(last.version_info, "30")
        before = [d for at, d in done if at < flood]
        during = sorted(d for at, d in done if flood <= at <= flooded)
        rate_before, rate_during = len(before) / 1.0, len(during) / (flooded - flood)
        p99 = during[int(len(during) * 0.99)] if during else float("inf")
        print("ShouldRateLimit: %.0f calls/s alone, %.0f during 10 pushes/s (p50 %.2f ms, p99 %.2f ms)"
              % (rate_before, rate_during, during[len(during) // 2] * 1e3 if during else 0, p99 * 1e3),
              file=sys.stderr)
        # Decisions go on while pushes apply: at least a quarter of the rate they had alone, in the same run (the
        # pushes take some of the machine's two cores; a decision waiting on a push's swap would stall to nothing).
        self.assertGreater(len(before), 10)
        self.assertGreaterEqual(rate_during, 0.25 * rate_before)

    def test_start_up_errors(self):
        def run(*args):
            p = subprocess.run([BINARY, "serve", *args], capture_output=True, text=True, timeout=30)
            return p.returncode, p.stderr

        code, err = run("--config", "/nonexistent", "--xds-server", "127.0.0.1:1")
        self.assertEqual(code, 2)
        self.assertIn("--config and --xds-server are alternatives", err)
        code, err = run("--xds-server", "127.0.0.1:1", "--state-file", "/tmp/rk-xds-state")
        self.assertEqual(code, 2)
        self.assertIn("--state-file: not with --xds-server", err)
        code, err = run("--xds-server", "127.0.0.1:1", "--xds-node-metadata", "[1]", "--http", "127.0.0.1:0",
                        "--admin", "127.0.0.1:0")
        self.assertEqual(code, 2)
        self.assertIn("--xds-node-metadata: '[1]' is not a JSON object", err)
        code, err = run("--xds-server", "127.0.0.1:1", "--xds-tls-ca", "/nonexistent/ca.crt")
        self.assertEqual(code, 2)
        self.assertIn("--xds-tls-ca", err)
        code, err = run("--xds-server", "127.0.0.1:1", "--xds-headers", "bad header=1")
        self.assertEqual(code, 2)
        self.assertIn("--xds-headers", err)


if __name__ == "__main__":
    BINARY, PROTO_DIR, MAKE_CERTS = sys.argv[1:4]
    out = tempfile.mkdtemp(prefix="rk-xds-pb-")
    try:
        pb = generate(out, PROTO_DIR)
        unittest.main(argv=sys.argv[:1] + sys.argv[4:], verbosity=2)
    finally:
        shutil.rmtree(out, ignore_errors=True)
