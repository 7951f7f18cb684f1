#!/usr/bin/python3
"""Every statsd name ratekeeper sends (src/metrics/names.h's kStatsd* names; each descriptor stat under stats keys of
one, two and three parts) put through Envoy Gateway's statsd_exporter mapping (tests/testdata/
envoy_gateway_statsd_mapping.yaml, applied by tests/support/statsd_mapping.py): each must become the series Envoy
Gateway's dashboards read, with the labels ratekeeper's own Prometheus series carry. No server: the names from the
source, the rules from the data. integration/statsd_test.py does the same with the names a statsd daemon received.
Run by ctest: statsd_mapping_test.py SOURCE_DIR.
"""
import os
import re
import sys
import unittest

SOURCE = None


def names_h():
    with open(os.path.join(SOURCE, "src", "metrics", "names.h")) as f:
        text = f.read()
    consts = dict(re.findall(r"inline constexpr std::string_view (kStatsd\w+) = \"([^\"]+)\";", text))
    stats = re.search(r"kStatsdDescriptorStats = \{([^}]*)\}", text).group(1)
    return consts, re.findall(r"\"(\w+)\"", stats)


class EnvoyGatewayMapping(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
        import statsd_mapping
        cls.m = statsd_mapping
        cls.rules = statsd_mapping.load(os.path.join(SOURCE, "tests", "testdata", "envoy_gateway_statsd_mapping.yaml"))
        cls.consts, cls.stats = names_h()

    def map(self, name, kind="c"):
        return self.m.map_name(self.rules, name, kind)

    def test_descriptor_stats_become_the_per_descriptor_series(self):
        self.assertEqual(self.stats, ["total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"])
        prefix = self.consts["kStatsdRateLimit"]
        for stat in self.stats:
            series = "ratelimit_service_rate_limit_" + stat
            self.assertEqual(self.map(prefix + "edge.remote_address_10_0_0_1." + stat),
                             (series, {"domain": "edge", "key1": "remote_address_10_0_0_1"}))
            self.assertEqual(self.map(prefix + "edge.tenant_acme.route_checkout." + stat),
                             (series, {"domain": "edge", "key1": "tenant_acme", "key2": "route_checkout"}))
            # Deeper keys (or values with dots): the first three parts, as ratekeeper's own series label them.
            self.assertEqual(self.map(prefix + "edge.a.b.c." + stat),
                             (series, {"domain": "edge", "key1": "a", "key2": "b"}))

    def test_the_service_and_server_names_become_their_series(self):
        c = self.consts
        want = {
            c["kStatsdConfigLoadSuccess"]: ("ratelimit_service_config_load_success", {}),
            c["kStatsdConfigLoadError"]: ("ratelimit_service_config_load_error", {}),
            c["kStatsdRedisError"]: ("ratelimit_service_should_rate_limit_error", {"err_type": "redis_error"}),
            c["kStatsdServiceError"]: ("ratelimit_service_should_rate_limit_error", {"err_type": "service_error"}),
            c["kStatsdTotalRequests"]: ("ratelimit_service_total_requests", {"grpc_method": "ShouldRateLimit"}),
        }
        for name, result in want.items():
            self.assertEqual(self.map(name), result, name)
        self.assertEqual(self.map(c["kStatsdResponseTime"], "ms"),
                         ("ratelimit_service_response_time_seconds", {"grpc_method": "ShouldRateLimit"}))
        # Every kStatsd name is one of those (a new one must be added here, and to the mapping's reach).
        self.assertEqual(set(c) - {"kStatsdRateLimit"},
                         {"kStatsdConfigLoadSuccess", "kStatsdConfigLoadError", "kStatsdRedisError",
                          "kStatsdServiceError", "kStatsdTotalRequests", "kStatsdResponseTime"})

    def test_the_mapping_as_statsd_exporter_applies_it(self):
        # A rule limited to counters passes over a timer of the same name; a tagged name matches none.
        self.assertIsNone(self.map(self.consts["kStatsdTotalRequests"], "ms"))
        self.assertIsNone(self.map("ratelimit.service.config_load_success.__env=prod"))
        # Globs before regexes: a two-part key takes the glob's labels, without key2.
        self.assertEqual(self.map("ratelimit.service.rate_limit.d.k.over_limit")[1], {"domain": "d", "key1": "k"})
        # '*' is one whole part, an empty one too.
        self.assertEqual(self.map("ratelimit.service.rate_limit.d..over_limit")[1], {"domain": "d", "key1": ""})


if __name__ == "__main__":
    SOURCE = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
