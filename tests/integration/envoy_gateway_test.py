#!/usr/bin/python3
"""Envoy Gateway's rate-limit deployment, end to end: the real binary started through a `ratelimit` link with the
whole environment the deployment sets (tests/testdata/envoy_gateway/ratelimit.env), its rules pushed over xDS by the
control plane of tests/support/xds_plane.py as Envoy Gateway's own pushes them (CONFIG_TYPE=GRPC_XDS_SOTW, mutual TLS
to the control plane), and asked as Envoy asks it: gRPC over mutual TLS, the kubelet's /healthcheck in plain HTTP on
the probe port, Prometheus on PROMETHEUS_ADDR serving the series Envoy Gateway's e2e tests and dashboards read,
statsd as the environment says, the response's dynamic metadata, and a push that changes a limit.

What a test on one machine must change is changed, and nothing else: the addresses (free loopback ports, the control
plane's and Redis's), the certificate paths (/certs/tls.crt, tls.key and ca.crt of the test's own CA, the one
certificate serving gRPC and presented to the control plane, as Envoy Gateway mounts one), Redis (a redis-server of
the test's, TLS only, with the fixture's password and a client certificate; REDIS_TLS_CACERT added, since Envoy
Gateway's Redis has a certificate the system trusts) and the trace collector (a closed port). The variables
docs/envoy-gateway.md's EnvoyGateway resource adds through rateLimitDeployment.container.env are added, read from
the doc itself: GRPC_CLIENT_TLS_CACERT, so gRPC asks for Envoy's certificate (mutual TLS), and
RESPONSE_DYNAMIC_METADATA=true.
Run by ctest: envoy_gateway_test.py BINARY PROTO_DIR MAKE_CERTS.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

import grpc
import yaml
from google.protobuf import json_format

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from harness import free_port, prometheus_series, wait_until  # noqa: E402  (tests/support: the shared helpers)
from ratelimit_env import Process, fixture, link, serve_flags, tls_redis  # noqa: E402  (the `ratelimit` link's)
from xds_plane import ControlPlane, generate  # noqa: E402  (the control plane)

BINARY = PROTO_DIR = MAKE_CERTS = None
pb = None

# Envoy Gateway's push for a BackendTrafficPolicy limiting every client address (clientSelectors' sourceCIDR
# 0.0.0.0/0) of one route: the listener's name as the domain, the route's generic key, then masked_remote_address.
DOMAIN = "default/eg/http"
ROUTE = "httproute/default/backend/rule/0"
CIDR = "0.0.0.0/0"


def push_config(limit):
    c = pb.conf.RateLimitConfig(name=DOMAIN, domain=DOMAIN)
    route = c.descriptors.add(key=ROUTE, value=ROUTE)
    masked = route.descriptors.add(key="masked_remote_address", value=CIDR)
    masked.rate_limit.unit = pb.conf.RateLimitUnit.Value("HOUR")
    masked.rate_limit.requests_per_unit = limit
    return c


def request():
    """What Envoy sends for that route: its generic key and the client's address masked by the CIDR."""
    r = pb.rls.RateLimitRequest(domain=DOMAIN)
    d = r.descriptors.add()
    d.entries.add(key=ROUTE, value=ROUTE)
    d.entries.add(key="masked_remote_address", value=CIDR)
    return r


def documented_env():
    """docs/envoy-gateway.md's EnvoyGateway resource: the variables its rateLimitDeployment's container adds."""
    with open(os.path.join(HERE, "..", "..", "docs", "envoy-gateway.md")) as f:
        doc = f.read()
    block = doc.split("<!-- docs-test: by tests/integration/envoy_gateway_test.py -->\n```yaml\n")[1].split("```")[0]
    resource = yaml.safe_load(block)
    assert resource["kind"] == "EnvoyGateway" and resource["apiVersion"] == "gateway.envoyproxy.io/v1alpha1"
    container = resource["provider"]["kubernetes"]["rateLimitDeployment"]["container"]
    assert "ratekeeper" in container["image"]
    assert resource["rateLimit"]["backend"]["type"] == "Redis"
    return {e["name"]: e["value"] for e in container["env"]}


def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class EnvoyGatewaysDeployment(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rk-eg-")
        self.cleanup = [lambda: shutil.rmtree(self.dir, ignore_errors=True)]
        certs = os.path.join(self.dir, "certs")
        os.mkdir(certs)
        subprocess.run(["sh", MAKE_CERTS, certs], check=True)
        self.cert = lambda name: os.path.join(certs, name)
        # Envoy Gateway's one certificate at /certs: tls.crt and tls.key, with ca.crt.
        self.mounted = os.path.join(self.dir, "mounted")
        os.mkdir(self.mounted)
        for ours, theirs in (("server.crt", "tls.crt"), ("server.key", "tls.key"), ("ca.crt", "ca.crt")):
            shutil.copy(self.cert(ours), os.path.join(self.mounted, theirs))

        # The control plane asks for ratelimit's certificate, as Envoy Gateway's xDS server does.
        creds = grpc.ssl_server_credentials([(self.read(self.cert("server.key")), self.read(self.cert("server.crt")))],
                                            root_certificates=self.read(self.cert("ca.crt")),
                                            require_client_auth=True)
        self.cp = ControlPlane(credentials=creds)
        self.cleanup.append(self.cp.stop)

        env = fixture()
        for name, value in env.items():
            if value.startswith("/certs/"):
                env[name] = os.path.join(self.mounted, value[len("/certs/"):])
        env["CONFIG_GRPC_XDS_SERVER_URL"] = "127.0.0.1:%d" % self.cp.port
        self.redis, redis_port = tls_redis(self.dir, self.cert, env["REDIS_AUTH"])
        self.cleanup.append(self.redis.stop)
        env.update(REDIS_URL="127.0.0.1:%d" % redis_port, REDIS_TLS_CLIENT_CERT=self.cert("client.crt"),
                   REDIS_TLS_CLIENT_KEY=self.cert("client.key"), REDIS_TLS_CACERT=self.cert("ca.crt"))
        if env.get("TRACING_ENABLED") == "true":
            if "--otlp-endpoint" in serve_flags(BINARY):
                env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "127.0.0.1:%d" % free_port()  # nothing listens: spans dropped
            else:
                del env["TRACING_ENABLED"]  # this build has no tracing yet (tests/cli/upstream_env_test.cc)
        # statsd where the test can see whether anything comes, flushed often so that it would.
        self.statsd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.statsd.bind(("127.0.0.1", 0))
        self.statsd.setblocking(False)
        self.cleanup.append(self.statsd.close)
        env.update(STATSD_HOST="127.0.0.1", STATSD_PORT=str(self.statsd.getsockname()[1]),
                   STATS_FLUSH_INTERVAL="100ms")
        self.prometheus_port = free_port()
        env["PROMETHEUS_ADDR"] = "127.0.0.1:%d" % self.prometheus_port
        added = documented_env()
        self.assertEqual(set(added), {"GRPC_CLIENT_TLS_CACERT", "RESPONSE_DYNAMIC_METADATA"})
        for name, value in added.items():
            env[name] = value.replace("/certs/", self.mounted + "/")
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        self.env = env
        self.link = link(BINARY, self.dir)

    def tearDown(self):
        for c in reversed(self.cleanup):
            c()

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def start(self, **more):
        """The link with the environment (and `more`), its listeners on free loopback ports; serve's own admin
        listener moved off 9090, and its drain after SIGTERM (5 s, for a load balancer to catch up) made 0, by
        arguments, which win over the variables."""
        ports = {name: free_port() for name in ("PORT", "GRPC_PORT", "DEBUG_PORT")}
        env = dict(self.env, HOST="127.0.0.1", GRPC_HOST="127.0.0.1", DEBUG_HOST="127.0.0.1",
                   **{k: str(v) for k, v in ports.items()}, **more)
        p = Process(self.dir, [self.link, "--admin", "127.0.0.1:%d" % free_port(), "--drain", "0s"], env=env)
        p.ports = ports
        self.cleanup.append(p.stop)
        wait_until(lambda: p.proc.poll() is not None or http_get(ports["DEBUG_PORT"], "/rlconfig")[0] == 200,
                   "ratelimit's debug listener")
        self.assertIsNone(p.proc.poll(), p.output())
        return p

    def channel(self, p, client=True):
        creds = grpc.ssl_channel_credentials(
            root_certificates=self.read(self.cert("ca.crt")),
            private_key=self.read(self.cert("client.key")) if client else None,
            certificate_chain=self.read(self.cert("client.crt")) if client else None)
        ch = grpc.secure_channel("127.0.0.1:%d" % p.ports["GRPC_PORT"], creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")])
        self.cleanup.append(ch.close)
        return ch

    def ask(self, ch):
        should = ch.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                request_serializer=pb.rls.RateLimitRequest.SerializeToString,
                                response_deserializer=pb.rls.RateLimitResponse.FromString)
        return should(request(), timeout=10)

    def health(self, ch):
        check = ch.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=pb.health.HealthCheckRequest.SerializeToString,
                               response_deserializer=pb.health.HealthCheckResponse.FromString)
        return pb.health.HealthCheckResponse.ServingStatus.Name(
            check(pb.health.HealthCheckRequest(service=""), timeout=10).status)

    def push(self, version, limit):
        reply = self.cp.reply_to(self.cp.push(version, [push_config(limit)]))
        self.assertFalse(reply.HasField("error_detail"), reply.error_detail.message)
        self.assertEqual(reply.version_info, version)

    def drain(self, received):
        """The datagrams that reached the statsd socket, added to `received`; whether the flush after the first
        push (config_load_success) is among them."""
        while True:
            try:
                received.append(self.statsd.recv(65536))
            except BlockingIOError:
                return any(b"ratelimit.service.config_load_success" in d for d in received)

    def prometheus(self):
        return http_get(self.prometheus_port, "/metrics")[1]

    def test_the_deployment_under_envoy_gateways_pushes(self):
        rl = self.start()
        ch = self.channel(rl)
        code = pb.rls.RateLimitResponse.Code.Name

        # Subscribed over mutual TLS (the control plane requires the certificate), as the node Envoy Gateway names.
        first = self.cp.next_request()
        self.assertEqual(first.node.id, "envoy-ratelimit")
        self.assertEqual(first.type_url, "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig")
        # FORCE_START_WITHOUT_INITIAL_CONFIG=true: ready before the first push (once every listener listens), every
        # request OK until rules come.
        wait_until(lambda: http_get(rl.ports["PORT"], "/healthcheck") == (200, "OK"), "ready without rules")
        self.assertEqual(self.health(ch), "SERVING")
        self.assertEqual(code(self.ask(ch).overall_code), "OK")

        self.push("1", 3)
        answers = [self.ask(ch) for _ in range(4)]
        self.assertEqual([code(a.overall_code) for a in answers], ["OK", "OK", "OK", "OVER_LIMIT"])
        self.assertEqual(answers[0].statuses[0].current_limit.requests_per_unit, 3)
        self.assertEqual(http_get(rl.ports["PORT"], "/healthcheck"), (200, "OK"))
        # RESPONSE_DYNAMIC_METADATA: the domain and the descriptors, as upstream fills them.
        md = json_format.MessageToDict(answers[3].dynamic_metadata)
        self.assertEqual(md["domain"], DOMAIN)
        self.assertEqual(md["descriptors"], [{"entries": [ROUTE + "=" + ROUTE, "masked_remote_address=" + CIDR]}])
        # The debug port shows the pushed rule.
        rlconfig = http_get(rl.ports["DEBUG_PORT"], "/rlconfig")[1]
        self.assertIn("masked_remote_address", rlconfig)
        self.assertIn(": unit=HOUR requests_per_unit=3, shadow_mode: false", rlconfig)

        # USE_PROMETHEUS on PROMETHEUS_ADDR: the series Envoy Gateway's e2e test queries
        # (ratelimit_service_rate_limit_over_limit{key2="masked_remote_address_0_0_0_0/0"}) and its dashboards read.
        text = self.prometheus()
        labels = frozenset({("domain", DOMAIN), ("key1", ROUTE + "_" + ROUTE),
                            ("key2", "masked_remote_address_0_0_0_0/0")})
        self.assertEqual(prometheus_series(text, "ratelimit_service_rate_limit_over_limit").get(labels), 1, text)
        self.assertEqual(prometheus_series(text, "ratelimit_service_rate_limit_total_hits").get(labels), 4)
        self.assertEqual(prometheus_series(text, "ratelimit_service_rate_limit_within_limit").get(labels), 3)
        self.assertGreaterEqual(sum(prometheus_series(text, "ratelimit_service_config_load_success").values()), 1)
        self.assertEqual(prometheus_series(text, "ratelimit_service_total_requests")
                         .get(frozenset({("grpc_method", "ShouldRateLimit")})), 5)

        # A push changing the limit: ACKed, the new limit in force at once.
        self.push("2", 6)
        after = self.ask(ch)
        self.assertEqual(after.statuses[0].current_limit.requests_per_unit, 6)
        self.assertEqual(code(after.overall_code), "OK")
        self.assertIn("requests_per_unit=6", http_get(rl.ports["DEBUG_PORT"], "/rlconfig")[1])

        # gRPC is mutual TLS only: no certificate, or no TLS, and nothing is decided; the probe port stays plain.
        with self.assertRaises(grpc.RpcError):
            self.ask(self.channel(rl, client=False))
        plain = grpc.insecure_channel("127.0.0.1:%d" % rl.ports["GRPC_PORT"])
        self.cleanup.append(plain.close)
        with self.assertRaises(grpc.RpcError):
            self.health(plain)
        self.assertEqual(http_get(rl.ports["PORT"], "/healthcheck"), (200, "OK"))

        # statsd as the environment says: USE_STATSD=false sends nothing (flushed every 100 ms all along).
        received = []
        wait_until(lambda: rl.proc.poll() is None and (self.env["USE_STATSD"] != "true" or self.drain(received)),
                   "a flush to statsd", retry_on=())
        self.drain(received)
        if self.env["USE_STATSD"] == "true":
            self.assertIn(b"ratelimit.service.config_load_success", b"\n".join(received))
        else:
            self.assertEqual(received, [])
        self.assertIsNone(rl.proc.poll(), rl.output())
        self.assertTrue(rl.stop(), rl.output())

    def test_without_force_start_not_ready_until_the_first_push(self):
        rl = self.start(FORCE_START_WITHOUT_INITIAL_CONFIG="false")
        ch = self.channel(rl)
        self.cp.next_request()
        status, _ = http_get(rl.ports["PORT"], "/healthcheck")
        self.assertEqual(status, 500)
        self.assertEqual(self.health(ch), "NOT_SERVING")
        self.push("1", 1)
        wait_until(lambda: http_get(rl.ports["PORT"], "/healthcheck") == (200, "OK"), "ready after the first push")
        wait_until(lambda: self.health(ch) == "SERVING", "gRPC health to follow")
        self.assertEqual([pb.rls.RateLimitResponse.Code.Name(self.ask(ch).overall_code) for _ in range(2)],
                         ["OK", "OVER_LIMIT"])


if __name__ == "__main__":
    BINARY, PROTO_DIR, MAKE_CERTS = sys.argv[1:4]
    out = tempfile.mkdtemp(prefix="rk-eg-pb-")
    try:
        pb = generate(out, PROTO_DIR)
        unittest.main(argv=sys.argv[:1] + sys.argv[4:], verbosity=2)
    finally:
        shutil.rmtree(out, ignore_errors=True)
