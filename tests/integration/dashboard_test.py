#!/usr/bin/python3
"""The dashboard's endpoints on the real `ratekeeper serve`, over real HTTP: what a client of the admin listener
sees (headers, sizes, methods) and that bad input changes nothing. Run by ctest: dashboard_test.py BINARY. Starts
servers the way serve_test.py does (free ports, a temporary directory).
"""
import json
import os
import sys
import threading
import time
import unittest

import serve_test

RULES = """
domain: api
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: earrrl, half_life: 10s, name: per_user}
"""


class DashboardTest(unittest.TestCase):
    def setUp(self):
        self.server = serve_test.Server(RULES)

    def tearDown(self):
        self.server.stop()

    def admin(self, method, path, body=None):
        status, headers, data = self.server.request(method, path, body=body, admin=True)
        return status, headers, data

    def rates(self):
        status, _, data = self.admin("GET", "/v1/admin/rates")
        self.assertEqual(status, 200, data)
        return json.loads(data)["rules"]

    def test_page_and_its_files_with_types_and_policy(self):
        for path, kind in (("/ui", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")):
            status, headers, body = self.admin("GET", path)
            self.assertEqual(status, 200, path)
            self.assertTrue(headers["Content-Type"].startswith(kind), headers)
            self.assertIn("default-src 'none'", headers["Content-Security-Policy"])
            self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
            self.assertGreater(len(body), 100)
        # Not on the public listener.
        self.assertEqual(self.server.get("/ui")[0], 404)

    def test_hot_keys_and_rates_follow_traffic(self):
        for _ in range(30):
            self.server.check("mallory")
        self.server.check("alice")
        status, _, data = self.admin("GET", "/v1/admin/hot-keys?n=2&rule=user")
        self.assertEqual(status, 200, data)
        keys = json.loads(data)["rules"][0]["keys"]
        self.assertEqual([k["key"] for k in keys], ["mallory", "alice"])
        self.assertTrue(keys[0]["limited"])
        self.assertGreater(keys[0]["estimate"], 1)
        self.assertFalse(keys[1]["limited"])
        rule = self.rates()[0]
        self.assertEqual(rule["ok"] + rule["over_limit"], 31)
        self.assertGreater(rule["over_limit"], 0)

    def test_bad_input_is_400_naming_the_field_and_changes_nothing(self):
        self.server.check("bob")
        before = self.rates()
        peek_before = self.server.peek("bob")
        cases = [
            ("GET", "/v1/admin/hot-keys?n=1000", None, "n"),
            ("GET", "/v1/admin/hot-keys?what=1", None, "what"),
            ("POST", "/v1/admin/simulate", b"{not json", None),
            ("POST", "/v1/admin/simulate", b"[" * 5000 + b"]" * 5000, None),
            ("POST", "/v1/admin/simulate", json.dumps({"duration": "10s", "limiter": {"algorithm": "quantum", "limit": 1},
                                                       "clients": [{"name": "a", "pattern": "periodic", "rate": 1}]}),
             "limiter.algorithm"),
            ("POST", "/v1/admin/simulate", json.dumps({"duration": "100000h", "limiter": {"algorithm": "gcra", "limit": 1},
                                                       "clients": [{"name": "a", "pattern": "periodic", "rate": 1}]}),
             "duration"),
        ]
        for method, path, body, field in cases:
            status, _, data = self.admin(method, path, body)
            self.assertEqual(status, 400, (path, data))
            self.assertEqual(json.loads(data)["error"].get("field"), field, data)
        status, _, _ = self.admin("POST", "/v1/admin/simulate", b"{" + b" " * (70 * 1024) + b"}")
        self.assertEqual(status, 413)
        self.assertEqual(self.admin("PUT", "/v1/admin/simulate")[0], 405)
        self.assertEqual(self.rates(), before)
        # The key's state: no more charged (its estimate only decays with real time meanwhile).
        peek_after = self.server.peek("bob")
        self.assertEqual(peek_after["code"], peek_before["code"])
        self.assertLessEqual(peek_after["estimate"], peek_before["estimate"])
        _, _, metrics = self.admin("GET", "/metrics")
        self.assertIn('ratekeeper_bad_requests_total{protocol="admin",reason="invalid_request"} 6', metrics.decode())

    def memory(self, field):
        """The server's VmRSS or VmHWM (its peak), in bytes."""
        with open("/proc/%d/status" % self.server.proc.pid) as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

    def test_a_what_if_is_weighed_before_it_is_made_and_runs_off_the_listener(self):
        # The attack of "hostile round two": 100,000 clients of a 4,089-byte name held the admin listener for
        # seconds and left the process at 1.6 GB. Refused at once now, from the numbers, with nothing made.
        before = self.memory("VmRSS")
        start = time.monotonic()
        status, _, data = self.admin("POST", "/v1/admin/simulate", json.dumps(
            {"duration": "60s", "limiter": {"algorithm": "gcra", "limit": 5},
             "clients": [{"name": "n" * 4089, "pattern": "periodic", "rate": 1, "count": 100000}]}))
        self.assertLess(time.monotonic() - start, 0.5)  # a quarter of the what-if's budget of 2 s
        self.assertEqual(status, 400, data)
        self.assertEqual(json.loads(data)["error"]["field"], "clients[0].name", data)
        self.assertLess(self.memory("VmHWM") - before, 32 << 20)
        # A what-if that runs to its budget (each decision of a sliding log walks the log) does not hold the
        # listener: /healthz and /metrics answer meanwhile, and a second what-if is told when to come back.
        long_one = json.dumps({"duration": "100s",
                               "limiter": {"algorithm": "sliding_log", "limit": 100000, "window": "1000s"},
                               "clients": [{"name": "filler", "key": "k", "pattern": "periodic", "rate": 1000},
                                           {"name": "whale", "key": "k", "pattern": "periodic", "rate": 1000,
                                            "cost": 100000}]})
        answers = []
        runner = threading.Thread(target=lambda: answers.append(self.admin("POST", "/v1/admin/simulate", long_one)))
        runner.start()
        try:
            time.sleep(0.2)  # lets the listener take the what-if up
            self.assertEqual(self.admin("GET", "/healthz")[0], 200)
            self.assertEqual(self.admin("GET", "/metrics")[0], 200)
            status, headers, data = self.admin("POST", "/v1/admin/simulate", long_one)
            self.assertEqual(status, 503, data)
            self.assertEqual(headers["Retry-After"], "2")
            self.assertEqual(answers, [], "the what-if ended before the probes were answered: not a test of them")
        finally:
            runner.join()
        status, _, data = answers[0]
        self.assertEqual(status, 400, data)
        self.assertIn("the what-if's budget of 2000 ms", json.loads(data)["error"]["message"])
        self.assertLess(self.memory("VmRSS") - before, 32 << 20)


if __name__ == "__main__":
    serve_test.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
