#!/usr/bin/python3
"""End-to-end tests of `ratekeeper serve`: the real binary on loopback, real HTTP clients, and the real nginx
from Debian in front of a real upstream. Run by ctest: serve_test.py BINARY. Ports are free ports, files live in a
temporary directory, and every process started is stopped at the end.
"""
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import Serve, free_port, wait_until  # noqa: E402  (tests/support: the shared helpers)

BINARY = None
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

RULES = """
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_log, name: per_user}
  - key: other
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: sliding_log}
"""


class Server(Serve):
    def __init__(self, rules_text, extra=()):
        super().__init__(BINARY, rules_text, ["--reload-interval", "50ms", *extra])

    def check(self, user, domain="api", key="user"):
        body = json.dumps({"domain": domain, "descriptors": [{"entries": [{"key": key, "value": user}]}]})
        status, headers, data = self.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
        return status, headers, json.loads(data)

    def peek(self, user):
        body = json.dumps({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": user}]}]})
        status, _, data = self.request("POST", "/v1/admin/peek", body, admin=True)
        assert status == 200, data
        return json.loads(data)["statuses"][0]


def assert_refusal_fields(test, headers, passed_on=None):
    """The rate-limit fields of RULES' per_user refusal, exactly as the library's one formatter writes them
    (tests/http_fields/rate_limit_headers_test.cc; the nginx module's in nginx_module_test.py), or those of them a proxy
    passes on. Only t depends on the wall clock: the oldest of the 3 requests leaves the hour-long log in a little under
    3600 s."""
    t = int(headers.get("Retry-After", "0"))
    test.assertTrue(3500 < t <= 3600, headers)
    expected = {"RateLimit-Policy": '"per_user";q=3;w=3600', "RateLimit": '"per_user";r=0;t=%d' % t,
                "X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(t),
                "Retry-After": str(t)}
    names = passed_on or expected.keys()
    test.assertEqual({k: headers.get(k) for k in names}, {k: expected[k] for k in names})


class ServeTest(unittest.TestCase):
    def setUp(self):
        self.server = Server(RULES, extra=["--header-timeout", "500ms"])

    def tearDown(self):
        self.server.stop()

    def test_check_allows_then_refuses(self):
        for i in range(3):
            status, headers, body = self.server.check("alice")
            self.assertEqual(status, 200, body)
            self.assertEqual(body["overall_code"], "OK")
            self.assertEqual(body["statuses"][0]["limit_remaining"], 2 - i)
            self.assertEqual(body["statuses"][0]["current_limit"]["name"], "per_user")
        status, headers, body = self.server.check("alice")
        self.assertEqual(status, 429)
        self.assertEqual(body["overall_code"], "OVER_LIMIT")
        self.assertEqual(body["statuses"][0]["code"], "OVER_LIMIT")
        assert_refusal_fields(self, headers)
        # Another user, and an unknown domain, are unaffected.
        self.assertEqual(self.server.check("bob")[0], 200)
        status, _, body = self.server.check("alice", domain="nope")
        self.assertEqual((status, body["overall_code"]), (200, "OK"))

    def bad(self, raw, expect_status):
        """Sends raw bytes, returns (status, body) of the first answer, or None if the server closed."""
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(raw)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            if not data:
                return None
            head, _, rest = data.partition(b"\r\n\r\n")
            status = int(head.split(b" ")[1])
            self.assertEqual(status, expect_status, data[:500])
            return status

    def post(self, body, headers=None):
        return self.server.request("POST", "/v1/check", body, headers or {"Content-Type": "application/json"})

    def test_each_kind_of_bad_input_is_refused_and_changes_nothing(self):
        self.server.check("carol")
        cases = [
            ("{not json", 400, None),
            ('{"descriptors": [{"entries": [{"key": "user", "value": "carol"}]}]}', 400, "domain"),
            ('{"domain": 7, "descriptors": []}', 400, "domain"),
            ('{"domain": "api", "descriptors": []}', 400, "descriptors"),
            ('{"domain": "api", "descriptors": [{"entries": []}]}', 400, "descriptors[0].entries"),
            ('{"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": 5}]}]}', 400,
             "descriptors[0].entries[0].value"),
            ('{"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "carol"}]}], '
             '"hits_addend": 99999999999}', 400, "hits_addend"),
            ('{"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "%s"}]}]}' % ("x" * 5000),
             400, "descriptors[0].entries[0].value"),
            ('{"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "carol"}]}], "x": 1}', 400, "x"),
        ]
        for body, status, field in cases:
            got, headers, data = self.post(body)
            self.assertEqual(got, status, body)
            err = json.loads(data)["error"]
            self.assertEqual(err["code"], status)
            self.assertTrue(err["message"])
            if field:
                self.assertEqual(err.get("field"), field, body)
        # A body over 64 KiB, headers over 16 KiB, a wrong method, a path that does not exist.
        big = '{"domain": "api", "pad": "%s"}' % ("x" * 70000)
        self.assertEqual(self.post(big)[0], 413)
        self.assertEqual(self.server.request("POST", "/v1/check", "{}", {"X-Big": "y" * 20000})[0], 431)
        self.assertEqual(self.server.request("GET", "/v1/check")[0], 405)
        self.assertEqual(self.server.get("/v2/whatever")[0], 404)
        self.bad(b"NOT-HTTP\r\n\r\n", 400)
        # A client that never finishes its headers is cut off after the header timeout.
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            rest = s.recv(65536)
            while rest and not rest.endswith(b"}") and time.monotonic() - started < 8:
                more = s.recv(65536)
                if not more:
                    break
                rest += more
            self.assertLess(time.monotonic() - started, 8)
        # Nothing above charged carol: one used, two left; and the service still answers.
        self.assertEqual(self.server.peek("carol")["limit_remaining"], 1)
        self.assertEqual(self.server.check("carol")[0], 200)
        metrics = self.server.get("/metrics", admin=True)[2].decode()
        self.assertIn('ratekeeper_bad_requests_total{protocol="http",reason="invalid_json"}', metrics)

    def test_admin_peek_reset_rules_metrics(self):
        self.server.check("dave")
        self.assertEqual(self.server.peek("dave")["limit_remaining"], 1)
        self.assertEqual(self.server.peek("dave")["limit_remaining"], 1)  # peeking charges nothing
        body = json.dumps({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "dave"}]}]})
        status, _, data = self.server.request("POST", "/v1/admin/reset", body, admin=True)
        self.assertEqual((status, json.loads(data)), (200, {"reset": [True]}))
        self.assertEqual(self.server.peek("dave")["limit_remaining"], 2)
        status, _, data = self.server.get("/v1/rules", admin=True)
        rules = json.loads(data)
        self.assertEqual(len(rules["version"]), 16)
        self.assertEqual(rules["domains"][0]["rules"][0]["algorithm"], "sliding_log")
        metrics = self.server.get("/metrics", admin=True)[2].decode()
        self.assertIn('ratekeeper_decisions_total{domain="api",result="ok",rule="user"} 1', metrics)
        self.assertIn('ratekeeper_config_reloads_total{result="success"} 1', metrics)
        self.assertIn('ratekeeper_store_keys{domain="api",rule="user"}', metrics)
        # A domain no rules file names never becomes a label value of its own (clients choose domains).
        self.server.check("x", domain="attacker-chosen-domain")
        metrics = self.server.get("/metrics", admin=True)[2].decode()
        self.assertIn('ratekeeper_decisions_total{domain="(unknown)",result="no_rule",rule=""} 1', metrics)
        self.assertNotIn("attacker-chosen-domain", metrics)
        # The admin API is not on the public listener.
        self.assertEqual(self.server.get("/metrics")[0], 404)

    def test_admin_refuses_cross_site_and_rebound_requests(self):
        """Issue 19: a page elsewhere posted a text/plain reset with its own Origin (no CORS preflight needed), and a
        DNS name rebound to 127.0.0.1 read the hot keys. Both are refused, and nothing was reset."""
        for _ in range(3):
            self.server.check("mallory")
        self.assertEqual(self.server.check("mallory")[0], 429)
        body = json.dumps({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "mallory"}]}]})
        port = self.server.admin_port
        attacks = [
            ({"Content-Type": "text/plain", "Origin": "https://evil.example", "Host": "evil.example:%d" % port}, 403),
            ({"Content-Type": "text/plain", "Origin": "https://evil.example"}, 403),
            ({"Content-Type": "text/plain"}, 415),
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({"Content-Type": "application/json", "Host": "rebind.evil.example:%d" % port}, 403),
            ({"Content-Type": "application/json", "Origin": "null"}, 403),
        ]
        for headers, status in attacks:
            got, _, data = self.server.request("POST", "/v1/admin/reset", body, headers, admin=True)
            self.assertEqual(got, status, (headers, data))
            self.assertIn(json.loads(data)["error"]["field"], ("Host", "Origin", "Content-Type"))
        for path in ("/v1/admin/hot-keys", "/v1/rules", "/metrics", "/ui"):
            got, _, _ = self.server.request("GET", path, headers={"Host": "rebind.evil.example:%d" % port}, admin=True)
            self.assertEqual(got, 403, path)
        self.assertEqual(self.server.check("mallory")[0], 429)  # still refused: no reset got through
        self.assertIn('ratekeeper_bad_requests_total{protocol="admin",reason="foreign_host"}',
                      self.server.get("/metrics", admin=True)[2].decode())
        # The page's own requests, by IP literal or localhost name, and the same Origin, pass.
        for host in ("127.0.0.1:%d" % port, "localhost:%d" % port):
            got, _, data = self.server.request(
                "POST", "/v1/admin/reset", body,
                {"Content-Type": "application/json", "Host": host, "Origin": "http://" + host}, admin=True)
            self.assertEqual(got, 200, data)
        self.assertEqual(self.server.check("mallory")[0], 200)

    def test_live_reload_keeps_counters_and_survives_broken_files(self):
        for _ in range(3):
            self.server.check("erin")
        self.assertEqual(self.server.check("erin")[0], 429)
        version = json.loads(self.server.get("/v1/rules", admin=True)[2])["version"]
        # Another rule changes: erin's rule did not, so erin stays refused.
        self.server.write(RULES.replace("requests_per_unit: 100", "requests_per_unit: 101"))
        try:  # the reloader polls every 250 ms; a sanitizer build on a loaded machine can take a while
            wait_until(lambda: json.loads(self.server.get("/v1/rules", admin=True)[2])["version"] != version,
                       "a reload", 30)
        except AssertionError:
            raise AssertionError("no reload seen; the server said:\n" + self.server.output())
        self.assertEqual(self.server.check("erin")[0], 429)
        # A broken file keeps the last good rules, and says so.
        version = json.loads(self.server.get("/v1/rules", admin=True)[2])["version"]
        self.server.write(RULES.replace("unit: hour", "unit: fortnight", 1))
        wait_until(lambda: 'ratekeeper_config_reloads_total{result="failure"} 1' in
                   self.server.get("/metrics", admin=True)[2].decode(), "the failed reload to be counted")
        self.assertEqual(json.loads(self.server.get("/v1/rules", admin=True)[2])["version"], version)
        self.assertEqual(self.server.check("erin")[0], 429)
        self.assertIn("rules.yaml:5:24: descriptors[0] (user).rate_limit.unit", self.server.output())
        # erin's own limit changes: a new rule, new counters.
        self.server.write(RULES.replace("requests_per_unit: 3", "requests_per_unit: 5"))
        wait_until(lambda: self.server.check("frank")[2]["statuses"][0]["current_limit"]["requests_per_unit"] == 5,
                   "the new limit")
        self.assertEqual(self.server.check("erin")[0], 200)

    def test_sigterm_drains_and_exits_zero(self):
        self.server.check("gina")
        self.server.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.server.proc.wait(timeout=15), 0)
        self.assertIn('"msg":"stopped"', self.server.output())

FORWARD_RULES = """
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: sliding_log, name: per_client}
  - key: path
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_log, name: login}
forward_auth:
  trusted_proxies: [127.0.0.1]
  descriptors:
    - entries: [{key: remote_address, from: client_ip}]
    - entries: [{key: path, from: path}]
"""


# upstream's test/integration/runtime/current/ratelimit/config/another.yaml, the part its integration test uses.
ANOTHER = """
domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
"""


class StateFileTest(unittest.TestCase):
    """--state-file: the in-process store's counters survive a restart, for the rules that did not change."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rk-state-")
        self.path = os.path.join(self.dir, "ratekeeper.state")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_server(self, rules, during, extra=()):
        """Starts serve on the state file, runs during(server), stops it with SIGTERM; returns its log."""
        server = Server(rules, extra=["--state-file", self.path, "--state-interval", "1h", *extra])
        try:
            during(server)
            server.proc.send_signal(signal.SIGTERM)
            self.assertEqual(server.proc.wait(timeout=15), 0)
            return server.output()
        finally:
            server.stop()

    def codes(self, server, user, n):
        return [server.check(user)[0] for _ in range(n)]

    def test_counters_survive_a_restart_unless_the_rule_changed(self):
        log = self.run_server(RULES, lambda s: self.assertEqual(self.codes(s, "ann", 4), [200, 200, 200, 429]))
        self.assertIn('"msg":"no state file yet, starting fresh"', log)
        self.assertIn('"msg":"state saved"', log)
        self.assertTrue(os.path.exists(self.path))
        self.assertEqual(os.stat(self.path).st_mode & 0o077, 0)  # keys are clients' names: the owner's alone

        # The same rules: ann is still limited, bob is fresh.
        log = self.run_server(RULES, lambda s: (self.assertEqual(self.codes(s, "ann", 1), [429]),
                                                self.assertEqual(self.codes(s, "bob", 1), [200])))
        self.assertIn('"msg":"state restored"', log)
        self.assertIn('"keys":"1"', log)

        # ann's limit changed (its identity with it): fresh counters, as after a live reload.
        changed = RULES.replace("requests_per_unit: 3", "requests_per_unit: 4")
        log = self.run_server(changed, lambda s: self.assertEqual(self.codes(s, "ann", 5), [200] * 4 + [429]))
        self.assertIn('"rules_changed":"1"', log)

    def test_a_damaged_file_is_logged_and_ignored(self):
        self.run_server(RULES, lambda s: self.codes(s, "ann", 4))
        with open(self.path, "r+b") as f:
            data = bytearray(f.read())
            data[len(data) // 2] ^= 0x10
            f.seek(0)
            f.write(data)
        log = self.run_server(RULES, lambda s: self.assertEqual(self.codes(s, "ann", 1), [200]))
        self.assertIn('"msg":"state file ignored, starting fresh"', log)
        self.assertIn("checksum mismatch", log)
        with open(self.path, "wb") as f:
            f.write(b"not a state file at all")
        log = self.run_server(RULES, lambda s: self.assertEqual(self.codes(s, "ann", 1), [200]))
        self.assertIn("not a ratekeeper state file", log)

    def test_under_a_key_only_the_keys_file_comes_back(self):
        """--state-file-key-file: the file carries an HMAC-SHA256; one forged with a valid CRC is refused."""
        self.run_server(RULES, lambda s: self.codes(s, "ann", 4))
        with open(self.path, "rb") as f:
            unkeyed = f.read()  # what anyone who can write the file can make: a valid CRC, no MAC
        key = os.path.join(self.dir, "state.key")
        with open(key, "w") as f:
            f.write("k" * 32 + "\n")
        keyed = ["--state-file-key-file", key]
        log = self.run_server(RULES, lambda s: self.assertEqual(self.codes(s, "ann", 1), [200]), keyed)
        self.assertIn("without a MAC, and --state-file-key-file is set", log)
        self.run_server(RULES, lambda s: self.codes(s, "ann", 3), keyed)
        log = self.run_server(RULES, lambda s: self.assertEqual(self.codes(s, "ann", 1), [429]), keyed)
        self.assertIn('"msg":"state restored"', log)
        with open(self.path, "wb") as f:
            f.write(unkeyed)
        log = self.run_server(RULES, lambda s: self.assertEqual(self.codes(s, "ann", 1), [200]), keyed)
        self.assertIn('"msg":"state file ignored, starting fresh"', log)

    def test_bad_state_flags_stop_the_start(self):
        rules = os.path.join(self.dir, "rules.yaml")
        with open(rules, "w") as f:
            f.write(RULES)
        missing = os.path.join(self.dir, "missing", "x.state")
        short_key = os.path.join(self.dir, "short.key")
        with open(short_key, "w") as f:
            f.write("short\n")
        for flags, message in ((["--state-file", missing], "--state-file: the directory of '%s'" % missing),
                               (["--state-file", self.dir], "--state-file: '%s' is not a regular file" % self.dir),
                               (["--state-file", self.path, "--state-interval", "0s"],
                                "--state-interval: '0s' is not a duration from 1s to 24h"),
                               (["--state-file", self.path, "--state-interval", "2d"],
                                "--state-interval: '2d' is not a duration from 1s to 24h"),
                               (["--state-file", self.path, "--state-file-key-file", short_key],
                                "--state-file-key-file: '%s' is 5 bytes long; it must be at least 32 bytes" % short_key),
                               (["--state-file-key-file", rules],
                                "--state-file-key-file: '%s' given without --state-file" % rules)):
            r = subprocess.run([BINARY, "serve", "--config", rules, *flags], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(message, r.stderr)


class EnvoyRatelimitSurfaceTest(unittest.TestCase):
    """envoyproxy/ratelimit's own HTTP surface (/json, /healthcheck) and per-descriptor counters, through the real
    binary: its test/integration/integration_test.go (testBasicBaseConfig) with the requests sent to /json."""

    def setUp(self):
        self.server = Server(ANOTHER)

    def tearDown(self):
        self.server.stop()

    def json(self, *descriptors):
        body = json.dumps({"domain": "another", "descriptors": [
            {"entries": [{"key": k, "value": v}]} for k, v in descriptors]})
        status, headers, data = self.server.request("POST", "/json", body)
        return status, headers, json.loads(data)

    def counter(self, name, key1):
        line = 'ratelimit_service_rate_limit_%s{domain="another",key1="%s",key2=""} ' % (name, key1)
        metrics = self.server.get("/metrics", admin=True)[2].decode()
        at = metrics.find("\n" + line)
        return int(metrics[at + 1 + len(line):].split("\n")[0]) if at >= 0 else None

    def test_integration_test_basic_base_config(self):
        value = str(os.getpid())
        for i in range(25):
            status, headers, body = self.json(("key2", value))
            over = i >= 20
            self.assertEqual(status, 429 if over else 200)
            self.assertEqual(headers["Content-Type"], "application/json")
            self.assertEqual(body["overallCode"], "OVER_LIMIT" if over else "OK")
            st = body["statuses"][0]
            self.assertEqual(st["currentLimit"], {"requestsPerUnit": 20, "unit": "MINUTE"})
            self.assertEqual(st.get("limitRemaining", 0), 0 if over else 20 - (i + 1))
            self.assertRegex(st["durationUntilReset"], r"^\d+(\.\d+)?s$")
            self.assertEqual(self.counter("total_hits", "key2"), i + 1)
            self.assertEqual(self.counter("over_limit", "key2"), max(0, i - 19))
        # Two keys in one request: key2 stays over (5 refused above), key3's own 10 an hour run out.
        for i in range(15):
            status, _, body = self.json(("key2", value + "x"), ("key3", value))
            self.assertEqual(status, 429 if i >= 10 else 200)
            self.assertEqual(self.counter("total_hits", "key2"), i + 26)
            self.assertEqual(self.counter("over_limit", "key2"), 5)
            self.assertEqual(self.counter("total_hits", "key3"), i + 1)
            self.assertEqual(self.counter("over_limit", "key3"), max(0, i - 9))
        self.assertEqual(self.counter("within_limit", "key3"), 10)
        self.assertEqual(self.counter("near_limit", "key3"), 2)  # the 9th and 10th of 10, past 0.8

    def test_json_bad_requests_and_healthcheck(self):
        for body in (b"", b"}", b'{"domain": "another"}'):
            status, headers, data = self.server.request("POST", "/json", body)
            self.assertEqual((status, data), (400, b"Bad Request\n"))
            self.assertEqual(headers["Content-Type"], "text/plain; charset=utf-8")
        status, headers, data = self.server.get("/healthcheck")
        self.assertEqual((status, data), (200, b"OK"))


class ForwardAuthTest(unittest.TestCase):
    """Issue 19's ways around a forward-auth limit, against the real binary: the test plays a trusted nginx (its
    peer address is 127.0.0.1) that sets X-Real-IP, X-Original-URI and X-Original-Method and passes the client's
    other headers on, as auth_request does."""

    def setUp(self):
        self.server = Server(FORWARD_RULES, extra=["--proxy", "nginx"])

    def tearDown(self):
        self.server.stop()

    def auth(self, client, uri="/", **client_headers):
        headers = {"X-Real-IP": client, "X-Original-URI": uri, "X-Original-Method": "GET"}
        headers.update({k.replace("_", "-"): v for k, v in client_headers.items()})
        status, _, data = self.server.request("GET", "/v1/auth/edge", headers=headers)
        return status, data

    def test_client_sent_forwarded_for_does_not_change_the_key(self):
        statuses = [self.auth("198.51.100.7", X_Forwarded_For="203.0.113.%d" % i)[0] for i in range(8)]
        self.assertEqual(statuses, [200] * 5 + [429] * 3)
        self.assertEqual(self.auth("198.51.100.8")[0], 200)  # another client is not refused for it

    def test_client_cannot_pick_someone_elses_key(self):
        for _ in range(5):  # the attacker spends the victim's allowance only if it can claim the victim's address
            self.auth("203.0.113.66", X_Forwarded_For="198.51.100.99")
        self.assertEqual(self.auth("198.51.100.99")[0], 200)

    def test_unparsable_address_is_refused_not_guessed(self):
        for value in ("unknown", "198.51.100.7, 203.0.113.1", ""):
            status, data = self.auth(value, X_Forwarded_For="198.51.100.1")
            self.assertEqual(status, 400, value)
            self.assertEqual(json.loads(data)["error"]["field"], "X-Real-IP")
        self.assertIn('ratekeeper_bad_requests_total{protocol="auth",reason="invalid_proxy_headers"} 3',
                      self.server.get("/metrics", admin=True)[2].decode())

    def test_every_spelling_of_a_limited_path_shares_its_limit(self):
        variants = ["//login", "/%6cogin", "/./login", "/x/../login", "/login;jsessionid=1", "/%2E/login",
                    "/login?x=1", "/..;/login"]
        clients = iter("192.0.2.%d" % i for i in range(1, 100))  # a client each: only the path limit binds
        self.assertEqual([self.auth(next(clients), "/login")[0] for _ in range(3)], [200] * 3)
        for uri in variants:
            self.assertEqual(self.auth(next(clients), uri)[0], 429, uri)
        self.assertEqual(self.auth(next(clients), "/logout")[0], 200)

    def test_one_ipv6_slash64_is_one_client(self):
        # 5 allowed per client: addresses all over one /64 share them; the next /64 is someone else.
        statuses = [self.auth("2001:db8:1:2:%x:%x:%x:%x" % (i, i * 7919 % 65536, 65535 - i, i ^ 0xbeef))[0]
                    for i in range(0, 65536, 4096)]
        self.assertEqual(statuses, [200] * 5 + [429] * 11)
        self.assertEqual(self.auth("::ffff:198.51.100.20")[0], 200)
        self.assertEqual(self.auth("2001:db8:1:3::1")[0], 200)
        hot = json.loads(self.server.get("/v1/admin/hot-keys?domain=edge&rule=remote_address", admin=True)[2])
        self.assertIn("2001:db8:1:2::/64", [k["key"] for k in hot["rules"][0]["keys"]])
        self.assertIn("198.51.100.20", [k["key"] for k in hot["rules"][0]["keys"]])

    def test_envoy_appends_the_path_to_the_domain(self):
        envoy = Server(FORWARD_RULES, extra=["--proxy", "envoy"])
        self.addCleanup(envoy.stop)

        def auth(client, path):
            return envoy.request("GET", "/v1/auth/edge" + path, headers={"X-Forwarded-For": client})[0]
        self.assertEqual([auth("192.0.2.%d" % i, "/login?a=1") for i in range(3)], [200] * 3)
        for i, path in enumerate(("//login", "/%6cogin", "/x/../login", "/login;jsessionid=1")):
            self.assertEqual(auth("192.0.2.%d" % (10 + i), path), 429, path)
        self.assertEqual(auth("192.0.2.20", "/logout"), 200)

    def test_bad_proxy_flags_stop_the_start(self):
        for flag, value, message in (("--proxy", "haproxy", "--proxy: 'haproxy' is not none, nginx, traefik"),
                                     ("--ipv6-prefix", "129", "--ipv6-prefix: '129' is not a prefix length from 1 to 128"),
                                     ("--ipv4-prefix", "0", "--ipv4-prefix: '0' is not a prefix length from 1 to 32"),
                                     ("--admin-hosts", "a.example,,b", "--admin-hosts: '' is not a host name")):
            r = subprocess.run([BINARY, "serve", "--config", self.server.rules, flag, value],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(message, r.stderr)


class CheckConfigTest(unittest.TestCase):
    def test_valid_and_broken(self):
        r = subprocess.run([BINARY, "check-config", os.path.join(ROOT, "examples", "rules.yaml")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("valid", r.stdout)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.yaml")
            with open(path, "w") as f:
                f.write("domain: x\ndescriptors:\n  - key: a\n    rate_limit: {unit: eon, requests_per_unit: 1}\n")
            r = subprocess.run([BINARY, "check-config", path], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn(path + ":4:24: descriptors[0] (a).rate_limit.unit: 'eon' is not a unit", r.stderr)

    def test_merge_domains_flag_and_setting(self):
        """envoyproxy/ratelimit's TestDomainMerge / TestDuplicateKeyDomainMerge (MERGE_DOMAIN_CONFIG), through
        check-config's --merge-domains and a settings file's merge-domains: true."""
        with tempfile.TemporaryDirectory() as d:
            rules = os.path.join(d, "rules")
            os.mkdir(rules)
            for name, key in (("merge_domain_key1.yaml", "key1"), ("merge_domain_key2.yaml", "key2")):
                with open(os.path.join(rules, name), "w") as f:
                    f.write("domain: test-domain\ndescriptors:\n  - key: %s\n    value: v\n"
                            "    rate_limit: {unit: minute, requests_per_unit: 10}\n" % key)
            r = subprocess.run([BINARY, "check-config", rules], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("domain 'test-domain' is already defined in", r.stderr)
            r = subprocess.run([BINARY, "check-config", "--merge-domains", rules], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("1 domain(s), 2 rule(s), valid", r.stdout)
            settings = os.path.join(d, "settings.yaml")
            with open(settings, "w") as f:
                f.write("config: %s\nmerge-domains: true\n" % rules)
            r = subprocess.run([BINARY, "check-config", "--settings", settings], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            # The same key=value in both files: an error naming both files and lines.
            second = os.path.join(rules, "merge_domain_key2.yaml")
            with open(second, "w") as f:
                f.write("domain: test-domain\ndescriptors:\n  - key: key1\n    value: v\n"
                        "    rate_limit: {unit: minute, requests_per_unit: 20}\n")
            r = subprocess.run([BINARY, "check-config", "--settings", settings], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn(second + ":3:5: descriptors[0]: the descriptor key1=v of domain 'test-domain' is already "
                          "defined at " + os.path.join(rules, "merge_domain_key1.yaml") + ":3", r.stderr)

    def test_serve_refuses_to_start_on_broken_rules(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.yaml")
            with open(path, "w") as f:
                f.write("domain: x\ndescriptors: 5\n")
            r = subprocess.run([BINARY, "serve", "--config", path, "--http", "127.0.0.1:%d" % free_port(),
                                "--admin", "127.0.0.1:%d" % free_port()], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("bad.yaml:2:14: descriptors: expected a list of descriptors", r.stderr)
            # There were no good rules to keep: the log says the rules were rejected, and nothing about keeping any.
            self.assertIn('"rules rejected"', r.stderr)
            self.assertNotIn("keeping the last good rules", r.stderr)


class SpecialFilesTest(unittest.TestCase):
    """An entry of the rules folder that is not a regular file (a FIFO, a symbolic link to /dev/zero) or is over
    the size bound: check-config and serve give the same error naming it, serve exits at once instead of hanging
    on the read (where SIGTERM could not stop it), and a reload keeps the last good rules."""

    REFUSED = ": refused unread (a rules file is a regular file, or a symbolic link to one)"
    # A refusal is a stat: far within this, even on a busy machine under a sanitizer. A read of the FIFO never ends.
    DEADLINE = 30

    def special(self, d, kind):
        """Makes the entry `kind` in d; returns its path and the error it must give."""
        if kind == "fifo":
            path = os.path.join(d, "pipe.yaml")
            os.mkfifo(path)
            return path, path + ": a FIFO, not a regular file" + self.REFUSED
        if kind == "zero":
            path = os.path.join(d, "zero.yaml")
            os.symlink("/dev/zero", path)
            return path, path + ": a symbolic link to /dev/zero, a character device, not a regular file" + self.REFUSED
        path = os.path.join(d, "big.yaml")
        with open(path, "w") as f:
            f.truncate(16 * 1024 * 1024 + 1)  # sparse: one byte past the bound
        return path, path + ": the file is 16777217 bytes, over the limit of 16777216"

    def test_check_config_and_serve_refuse_each_by_name(self):
        for kind in ("fifo", "zero", "big"):
            with self.subTest(kind), tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "good.yaml"), "w") as f:
                    f.write(RULES)
                path, error = self.special(d, kind)
                r = subprocess.run([BINARY, "check-config", d], capture_output=True, text=True, timeout=self.DEADLINE)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(error + "\n", r.stderr)
                proc = subprocess.Popen([BINARY, "serve", "--config", d, "--http", "127.0.0.1:%d" % free_port(),
                                         "--admin", "127.0.0.1:%d" % free_port()],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    out, err = proc.communicate(timeout=self.DEADLINE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    self.fail("serve did not exit with %s in its rules folder:\n%s" % (kind, out + err))
                self.assertEqual(proc.returncode, 1, out + err)
                self.assertIn(json.dumps(error)[1:-1], err)  # the log's JSON holds the same error
                self.assertIn("not valid (see above); not starting", err)

    def test_a_reload_keeps_the_last_good_rules_and_sigterm_still_stops(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "good.yaml"), "w") as f:
                f.write(RULES)
            server = Serve(BINARY, None, ["--reload-interval", "50ms"], d=d, config=d)
            try:
                self.assertEqual(server.request("POST", "/v1/check", json.dumps(
                    {"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "a"}]}]}))[0], 200)
                for kind in ("fifo", "zero", "big"):
                    path, error = self.special(d, kind)
                    wait_until(lambda: json.dumps(error)[1:-1] in server.output(), "the reload to refuse " + kind,
                               self.DEADLINE)
                    self.assertIn("keeping the last good rules", server.output())
                    os.remove(path)
                self.assertEqual(server.request("POST", "/v1/check", json.dumps(
                    {"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "a"}]}]}))[0], 200)
            finally:
                server.stop(must_stop=True)


class SettingsFileTest(unittest.TestCase):
    """`serve --settings FILE` and `check-config --settings FILE`: every problem in the file, each with its line and
    column and the setting as the file names it (the Redis settings are in redis_test.py)."""

    def run_with(self, command, text, *extra):
        with tempfile.TemporaryDirectory() as d:
            rules = os.path.join(d, "rules.yaml")
            with open(rules, "w") as f:
                f.write(RULES)
            settings = os.path.join(d, "settings.yaml")
            with open(settings, "w") as f:
                f.write(text.replace("RULES", rules))
            args = [BINARY, command, "--settings", settings, *extra]
            if command == "serve":
                args += ["--http", "127.0.0.1:%d" % free_port(), "--admin", "127.0.0.1:%d" % free_port()]
            r = subprocess.run(args, capture_output=True, text=True, timeout=30)
            return r.returncode, r.stderr.replace(settings, "settings.yaml"), r.stdout

    def test_every_bad_setting_is_reported_with_its_line_and_name(self):
        text = ("config: RULES\n"
                "bogus: 1\n"
                "threads: 0\n"
                "shadow-mode: maybe\n"
                "max-memory: lots\n"
                "colour: blue\n")
        for command in ("serve", "check-config"):
            code, err, _ = self.run_with(command, text)
            self.assertEqual(code, 2, err)
            for line in ("settings.yaml:2:1: unknown setting 'bogus'",
                         "settings.yaml:3:10: threads: '0' is not a whole number from 1 to 64",
                         "settings.yaml:4:14: shadow-mode: 'maybe' is not true or false",
                         "settings.yaml:5:13: max-memory: 'lots' is not a size of at least 1MiB",
                         "settings.yaml:6:1: unknown setting 'colour'"):
                self.assertIn(line, err, command)
            self.assertNotIn("--bogus", err)

    def test_the_command_line_wins_over_the_file(self):
        # check-config's PATH replaces the file's config, as serve's --config would.
        code, err, out = self.run_with("check-config", "config: /nonexistent\nmerge-domains: false\n",
                                       os.path.join(ROOT, "examples", "rules.yaml"))
        self.assertEqual(code, 0, err)
        self.assertIn("valid", out)


class Upstream(http.server.BaseHTTPRequestHandler):
    hits = 0
    lock = threading.Lock()
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with Upstream.lock:
            Upstream.hits += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class NginxTest(unittest.TestCase):
    """nginx auth_request in front of an upstream, configured as examples/nginx/nginx.conf is, with ratekeeper
    started with --proxy nginx: 200s, then 429 with Retry-After; the upstream never sees the refused requests; and
    what a client sends through nginx cannot change who it is or which path it asked for."""

    def start(self, rules):
        """ratekeeper, an upstream and nginx (the example config) in front; all stopped at the test's end."""
        server = Server(rules, extra=["--proxy", "nginx"])
        self.addCleanup(server.stop)
        upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=upstream.serve_forever, daemon=True).start()
        self.addCleanup(upstream.server_close)
        self.addCleanup(upstream.shutdown)
        nginx_dir = tempfile.mkdtemp(prefix="rk-nginx-")
        self.addCleanup(shutil.rmtree, nginx_dir, True)
        self.nginx_port = free_port()
        with open(os.path.join(ROOT, "examples", "nginx", "nginx.conf")) as f:
            conf = f.read()
        conf = (conf.replace("127.0.0.1:8080", "127.0.0.1:%d" % server.http_port)
                    .replace("127.0.0.1:8000", "127.0.0.1:%d" % upstream.server_address[1])
                    .replace("127.0.0.1:8888", "127.0.0.1:%d" % self.nginx_port)
                    .replace("/v1/auth/edge", "/v1/auth/api"))
        conf = "daemon off;\n" + conf  # its pid and temporary files are relative to -p nginx_dir
        conf_path = os.path.join(nginx_dir, "nginx.conf")
        with open(conf_path, "w") as f:
            f.write(conf)
        nginx_log = open(os.path.join(nginx_dir, "stderr"), "w")
        self.addCleanup(nginx_log.close)
        nginx = subprocess.Popen([NGINX, "-p", nginx_dir, "-c", conf_path, "-e", "stderr"],
                                 stdout=subprocess.DEVNULL, stderr=nginx_log)

        def stop_nginx():
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(timeout=15)
            except subprocess.TimeoutExpired:
                nginx.kill()
                nginx.wait()
        self.addCleanup(stop_nginx)
        wait_until(lambda: self.through("/probe")[0] in (200, 429), "nginx to serve")
        return server

    def through(self, path, **headers):
        conn = http.client.HTTPConnection("127.0.0.1", self.nginx_port, timeout=10)
        try:
            conn.request("GET", path, headers={k.replace("_", "-"): v for k, v in headers.items()})
            r = conn.getresponse()
            r.read()
            return r.status, dict(r.getheaders())
        finally:
            conn.close()

    def test_forward_auth_through_nginx(self):
        self.start(RULES + """
forward_auth:
  deny_status: 403
  trusted_proxies: [127.0.0.1]
  descriptors:
    - entries: [{key: user, from: header, header: X-User}]
""")
        Upstream.hits = 0
        answers = [self.through("/some/page", X_User="zoe") for _ in range(6)]
        self.assertEqual([s for s, _ in answers], [200, 200, 200, 429, 429, 429])
        refused = answers[3][1]
        # examples/nginx/nginx.conf passes these three on (auth_request_set ... add_header ... always).
        assert_refusal_fields(self, refused, ("RateLimit-Policy", "RateLimit", "Retry-After"))
        self.assertEqual(Upstream.hits, 3)  # the refused ones never reached it
        self.assertEqual(self.through("/some/page", X_User="yann")[0], 200)

    def test_what_a_client_sends_through_nginx_changes_neither_its_key_nor_its_path(self):
        """Issue 19, through the real nginx: a client's own X-Forwarded-For, X-Real-IP or X-Original-URI, and other
        spellings of a limited path, all get the same limit."""
        self.start("""
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 6, algorithm: sliding_log, name: per_client}
  - key: path
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: sliding_log, name: login}
forward_auth:
  deny_status: 403
  trusted_proxies: [127.0.0.1]
  descriptors:
    - entries: [{key: remote_address, from: client_ip}]
    - entries: [{key: path, from: path}]
""")
        Upstream.hits = 0
        self.assertEqual([self.through("/login")[0] for _ in range(2)], [200, 200])
        for path in ("//login", "/%6cogin", "/./login", "/x/../login", "/login;jsessionid=1"):
            self.assertEqual(self.through(path)[0], 429, path)
        self.assertEqual(self.through("/about", X_Original_URI="/other")[0], 429)  # 8th from 127.0.0.1
        for spoof in ({"X_Forwarded_For": "203.0.113.1"}, {"X_Real_IP": "203.0.113.2"}):
            self.assertEqual(self.through("/about", **spoof)[0], 429, spoof)
        self.assertEqual(Upstream.hits, 2)

if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
