#!/usr/bin/python3
"""envoyproxy/ratelimit's statistics as ratekeeper sends them (--statsd), received by a real statsd daemon (Etsy's
`statsd` from npm, its management port listing what it holds), after decisions over the gRPC API (grpcio); every
name received put through Envoy Gateway's statsd_exporter mapping (tests/testdata/envoy_gateway_statsd_mapping.yaml,
tests/support/statsd_mapping.py) into the series its dashboards read, and those compared with ratekeeper's own
Prometheus series on --prometheus's listener. Also: --statsd-tags, a stopped daemon's datagrams counted as lost,
and RateLimitResponse.dynamic_metadata (--grpc-response-metadata) as upstream fills it.
Run by ctest: statsd_test.py BINARY PROTO_DIR NODE NODE_MODULES.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc
from google.protobuf import json_format

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from harness import free_port, prometheus_series, stop, wait_until  # noqa: E402
import grpc_test  # noqa: E402  (its protoc step: the message classes)
import statsd_mapping  # noqa: E402

BINARY = PROTO_DIR = NODE = MODULES = None
rls = None
MAPPING = os.path.join(HERE, "..", "testdata", "envoy_gateway_statsd_mapping.yaml")

RULES = """
domain: eg
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
    metadata: {service_with_quota: {name: service_1}, weight: 2}
  - key: tenant
    value: acme
    descriptors:
      - key: route
        value: checkout
        rate_limit: {unit: hour, requests_per_unit: 3}
        metadata: {service_with_quota: {name: service_2, zone: b}}
  - key: bot
    value: crawler
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: remote_address
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            rate_limit: {unit: hour, requests_per_unit: 10}
"""


class StatsdDaemon:
    """Etsy's statsd on free loopback ports (UDP for metrics, TCP for management), nothing flushed during the test,
    names kept as received; stopped by pid."""

    def __init__(self, d):
        self.port, self.mgmt = free_port(), free_port()
        config = os.path.join(d, "statsd.js")
        with open(config, "w") as f:
            f.write('{ port: %d, address: "127.0.0.1", mgmt_port: %d, mgmt_address: "127.0.0.1", '
                    'flushInterval: 3600000, backends: [], keyNameSanitize: false }\n' % (self.port, self.mgmt))
        self.log = open(os.path.join(d, "statsd.log"), "w+")
        self.proc = subprocess.Popen([NODE, os.path.join(MODULES, "statsd", "stats.js"), config],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.command("health").startswith("health: up"), "statsd's management port")

    def command(self, cmd):
        with socket.create_connection(("127.0.0.1", self.mgmt), timeout=5) as s:
            s.sendall(cmd.encode() + b"\n")
            data = b""
            while not (data.endswith(b"END\n\n") or (cmd == "health" and data.endswith(b"\n"))):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data.decode()

    def counters(self):
        """name -> value, from util.inspect's text of the daemon's counters."""
        text = self.command("counters")
        return {m.group(1) or m.group(2): float(m.group(3))
                for m in re.finditer(r"^\s*(?:'([^']+)'|([\w.=-]+)): ([\d.e+-]+),?$", text, re.M)}

    def timers(self):
        text = self.command("timers")
        return {m.group(1) or m.group(2) for m in re.finditer(r"^[{\s]*(?:'([^']+)'|([\w.=-]+)): \[", text, re.M)}

    def stop(self):
        stop(self.proc)
        self.log.close()


class Ratekeeper:
    def __init__(self, d, name, statsd_port, *extra):
        rules = os.path.join(d, name + ".yaml")
        with open(rules, "w") as f:
            f.write(RULES)
        self.grpc_port, self.admin_port = free_port(), free_port()
        self.log = open(os.path.join(d, name + ".log"), "w+")
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--drain", "0s", "--config", rules, "--http", "127.0.0.1:%d" % free_port(),
             "--admin", "127.0.0.1:%d" % self.admin_port, "--grpc", "127.0.0.1:%d" % self.grpc_port,
             "--statsd", "127.0.0.1:%d" % statsd_port, "--stats-flush-interval", "100ms", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        grpc.channel_ready_future(self.channel).result(timeout=20)
        self.should = self.channel.unary_unary(
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
            request_serializer=rls.RateLimitRequest.SerializeToString,
            response_deserializer=rls.RateLimitResponse.FromString)

    def ask(self, domain, *descriptors, hits=0):
        r = rls.RateLimitRequest(domain=domain, hits_addend=hits)
        for entries in descriptors:
            d = r.descriptors.add()
            for k, v in entries:
                d.entries.add(key=k, value=v)
        return self.should(r, timeout=10)

    def metrics(self):
        return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.admin_port, timeout=10).read().decode()

    def stop(self):
        self.channel.close()
        stop(self.proc)
        self.log.close()


class StatsdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rk-statsd-")
        cls.statsd = StatsdDaemon(cls.dir)
        cls.prometheus_port = free_port()
        cls.rk = Ratekeeper(cls.dir, "rk", cls.statsd.port, "--prometheus", "127.0.0.1:%d" % cls.prometheus_port,
                            "--prometheus-path", "/stats/prometheus", "--grpc-response-metadata")

    @classmethod
    def tearDownClass(cls):
        cls.rk.stop()
        cls.statsd.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_0_flags_that_mean_nothing_alone_stop_the_start(self):
        rules = os.path.join(self.dir, "rk.yaml")
        for args, message in [
                (["--statsd-tags", "env:ci"], "--statsd-tags: given without --statsd"),
                (["--stats-flush-interval", "1s"], "--stats-flush-interval: given without --statsd"),
                (["--prometheus-path", "/p"], "--prometheus-path: given without --prometheus"),
                (["--statsd", "localhost"], "--statsd: 'localhost' is not HOST:PORT"),
                (["--statsd", "h:1", "--statsd-tags", "env"], "--statsd-tags: 'env' is not k1:v1,k2:v2"),
                (["--prometheus", "nowhere"], "--prometheus: 'nowhere' is not ADDR:PORT")]:
            r = subprocess.run([BINARY, "serve", "--config", rules, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(message, r.stderr, args)

    def test_1_upstreams_names_reach_statsd_and_map_to_envoy_gateways_series(self):
        codes = [self.rk.ask("eg", [("user", "u1")]).overall_code for _ in range(6)]
        self.assertEqual(codes, [rls.RateLimitResponse.OK] * 5 + [rls.RateLimitResponse.OVER_LIMIT])
        for _ in range(2):
            self.rk.ask("eg", [("tenant", "acme"), ("route", "checkout")])
            self.rk.ask("eg", [("bot", "crawler")])  # the second over the limit, let through: shadow_mode
        self.rk.ask("eg", [("remote_address", "10.0.0.1")])
        self.rk.ask("eg", [("a", "1"), ("b", "2"), ("c", "3")])
        with self.assertRaises(grpc.RpcError) as bad:
            self.rk.ask("", [("user", "u1")])
        self.assertEqual(bad.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        p = "ratelimit.service.rate_limit.eg."
        want = {
            p + "user.total_hits": 6, p + "user.within_limit": 5, p + "user.near_limit": 1, p + "user.over_limit": 1,
            p + "tenant_acme.route_checkout.total_hits": 2, p + "tenant_acme.route_checkout.within_limit": 2,
            p + "bot_crawler.total_hits": 2, p + "bot_crawler.within_limit": 1, p + "bot_crawler.over_limit": 1,
            p + "bot_crawler.near_limit": 1, p + "bot_crawler.shadow_mode": 1,  # its one hit is past 0.8 of 1
            p + "remote_address_10_0_0_1.total_hits": 1, p + "remote_address_10_0_0_1.within_limit": 1,
            p + "a.b.c.total_hits": 1, p + "a.b.c.within_limit": 1,
            "ratelimit.service.config_load_success": 1,
            "ratelimit_server.ShouldRateLimit.total_requests": 13,
            "ratelimit.service.call.should_rate_limit.service_error": 1,
        }

        def arrived():
            have = self.statsd.counters()
            return all(have.get(k) == v for k, v in want.items()) and have
        wait_until(arrived, "the counters at statsd: %s" % want, seconds=20, interval=0.1)
        counters = self.statsd.counters()
        timers = self.statsd.timers()
        self.assertEqual(counters["statsd.bad_lines_seen"], 0)  # every line sent parses
        received = {k: v for k, v in counters.items() if not k.startswith("statsd.")}
        # Exactly those: a counter that never moved is never sent (gostats skips zero deltas).
        self.assertEqual(received, want)
        self.assertEqual(timers, {"ratelimit_server.ShouldRateLimit.response_time"})

        # Envoy Gateway's mapping: every name received is one it turns into a series its dashboards read, with the
        # labels of ratekeeper's own series for it; the descriptors' series hold the same values.
        rules = statsd_mapping.load(MAPPING)
        prometheus = urllib.request.urlopen("http://127.0.0.1:%d/stats/prometheus" % self.prometheus_port,
                                            timeout=10).read().decode()
        mapped = {}
        for name, kind in [(n, "c") for n in received] + [(n, "ms") for n in timers]:
            m = statsd_mapping.map_name(rules, name, kind)
            self.assertIsNotNone(m, "Envoy Gateway's mapping has no rule for " + name)
            series_name, labels = m
            if kind == "c":
                key = (series_name, frozenset((k, v) for k, v in labels.items() if v))
                mapped[key] = mapped.get(key, 0) + received[name]
        self.assertEqual(statsd_mapping.map_name(rules, "ratelimit_server.ShouldRateLimit.response_time", "ms"),
                         ("ratelimit_service_response_time_seconds", {"grpc_method": "ShouldRateLimit"}))
        self.assertEqual(statsd_mapping.map_name(rules, p + "tenant_acme.route_checkout.total_hits", "c"),
                         ("ratelimit_service_rate_limit_total_hits",
                          {"domain": "eg", "key1": "tenant_acme", "key2": "route_checkout"}))
        self.assertIn(("ratelimit_service_rate_limit_shadow_mode",
                       frozenset({("domain", "eg"), ("key1", "bot_crawler")})), mapped)
        # ratekeeper's own series (--prometheus) are those the mapping makes of its statsd names, with their values.
        for (series_name, labels), value in mapped.items():
            self.assertEqual(prometheus_series(prometheus, series_name).get(labels), value, (series_name, labels))

    def test_2_the_prometheus_listener_serves_the_metrics_at_its_path_only(self):
        url = "http://127.0.0.1:%d" % self.prometheus_port
        with urllib.request.urlopen(url + "/stats/prometheus", timeout=10) as r:
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            self.assertIn("ratekeeper_build_info", r.read().decode())
        for path in ("/metrics", "/v1/rules", "/healthz"):
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(url + path, timeout=10)
            self.assertEqual(e.exception.code, 404, path)

    def test_3_dynamic_metadata_as_upstream(self):
        ok = self.rk.ask("eg", [("user", "meta")], [("tenant", "acme"), ("route", "checkout")], [("none", "x")],
                         hits=1)
        md = json_format.MessageToDict(ok.dynamic_metadata)
        self.assertEqual(md["domain"], "eg")
        self.assertEqual(md["hitsAddend"], 1)
        self.assertEqual([d["entries"] for d in md["descriptors"]],
                         [["user=meta"], ["tenant=acme", "route=checkout"], ["none=x"]])
        # The passed descriptors' metadata merged, the first one's value winning for a key both have.
        self.assertEqual(md["metadata"], {"service_with_quota": {"name": "service_1", "zone": "b"}, "weight": 2})
        # An over-limit descriptor's metadata is left out (u1 is over its limit since test_1).
        over = json_format.MessageToDict(self.rk.ask("eg", [("user", "u1")]).dynamic_metadata)
        self.assertEqual(over, {"domain": "eg", "descriptors": [{"entries": ["user=u1"]}]})
        # A descriptor's own limit and hits_addend are shown.
        r = rls.RateLimitRequest(domain="eg")
        d = r.descriptors.add()
        d.entries.add(key="none", value="y")
        d.hits_addend.value = 3
        d.limit.requests_per_unit = 7
        d.limit.unit = 1  # envoy.type.v3.RateLimitUnit SECOND
        own = json_format.MessageToDict(self.rk.should(r, timeout=10).dynamic_metadata)
        self.assertEqual(own["descriptors"], [{"entries": ["none=y"], "hitsAddend": 3,
                                               "limit": "requests_per_unit:7 unit:SECOND"}])

    def test_4_tags_are_appended_as_gostats_writes_them(self):
        tagged = Ratekeeper(self.dir, "tagged", self.statsd.port, "--statsd-tags", "env:ci,zone:eu.west")
        try:
            tagged.ask("eg", [("tenant", "acme"), ("route", "checkout")])
            name = "ratelimit.service.rate_limit.eg.tenant_acme.route_checkout.total_hits.__env=ci.__zone=eu_west"
            wait_until(lambda: self.statsd.counters().get(name) == 1, name, seconds=20, interval=0.1)
        finally:
            tagged.stop()

    def test_5_a_stopped_daemon_loses_datagrams_and_they_are_counted(self):
        self.statsd.stop()
        dropped = 'ratekeeper_statsd_datagrams_total{result="dropped"} '

        def counted():
            self.rk.ask("eg", [("remote_address", "10.0.0.2")])
            text = self.rk.metrics()
            return dropped in text and float(text.split(dropped)[1].split()[0]) > 0
        wait_until(counted, "datagrams counted as dropped", seconds=20, interval=0.2)
        self.assertEqual(self.rk.ask("eg", [("user", "new")]).overall_code, rls.RateLimitResponse.OK)


if __name__ == "__main__":
    BINARY, PROTO_DIR = os.path.abspath(sys.argv.pop(1)), os.path.abspath(sys.argv.pop(1))
    NODE, MODULES = sys.argv.pop(1), os.path.abspath(sys.argv.pop(1))
    grpc_test.PROTO_DIR = PROTO_DIR
    out = tempfile.mkdtemp(prefix="rk-pb2-")
    try:
        rls, _ = grpc_test.generate(out)
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(out, ignore_errors=True)
