#!/usr/bin/python3
"""TLS on the listeners and the admin token, end to end: the real `ratekeeper serve` with --tls-cert, --tls-key,
--tls-client-ca and --admin-token-file, on certificates tests/support/make_certs.sh makes with the openssl command,
against curl, Python's ssl and grpcio. Run by ctest: tls_test.py BINARY grpc|nogrpc. Ports are free ports, files
live in a temporary directory, every process started is stopped by its pid.
"""
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import harness  # noqa: E402  (tests/support: the shared helpers)
from harness import free_port, wait_until  # noqa: E402

BINARY = None
WITH_GRPC = False
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_CERTS = os.path.join(ROOT, "tests", "support", "make_certs.sh")
DOC = os.path.join(ROOT, "docs", "service.md")

RULES = """
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
"""
TOKEN = "s3cret-Token_0123456789"


def make_certs(d, *args):
    subprocess.run(["sh", MAKE_CERTS, d, *args], check=True)


def context(ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


class Serve(harness.Serve):
    """`ratekeeper serve` on free ports with `extra` flags, in directory `d` (the test's, with its certificates);
    ready once /readyz answers on the public listener (over TLS unless `tls` is false)."""

    def __init__(self, d, extra, tls=True, grpc=False, admin_address="127.0.0.1", client_cert=False):
        self.client_cert = client_cert
        self.tls = tls
        self.grpc_port = free_port() if grpc else None
        super().__init__(BINARY, RULES, extra, d=d, admin_address=admin_address)

    def more_args(self):
        return ["--grpc", "127.0.0.1:%d" % self.grpc_port] if self.grpc_port else []

    def wait_ready(self):
        wait_until(lambda: self.request("GET", "/readyz")[0] == 200, "ratekeeper to be ready",
                   retry_on=(OSError, ssl.SSLError, http.client.HTTPException), interval=0.05)

    def connection(self, admin=False, ctx=None):
        port = self.admin_port if admin else self.http_port
        if not self.tls:
            return http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        if ctx is None and self.client_cert:
            ctx = context(*(os.path.join(self.dir, n) for n in ("ca.crt", "client.crt", "client.key")))
        ctx = ctx or context(os.path.join(self.dir, "ca.crt"))
        return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "10", *args], capture_output=True, text=True)


def grpc_health(port, credentials):
    """gRPC health Check (service ""), as raw bytes: an empty request; SERVING is field 1 = 1. On a connection of
    its own (grpcio shares connections between channels otherwise), so each call is a new handshake."""
    import grpc
    with grpc.secure_channel("127.0.0.1:%d" % port, credentials,
                             options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        return channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=10)


class TlsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rk-tls-")
        make_certs(self.dir)
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def f(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        with open(self.f(name), "rb") as f:
            return f.read()

    def serve(self, extra, **kw):
        s = Serve(self.dir, extra, **kw)
        self.servers.append(s)
        return s

    def tls_flags(self, client_ca=False):
        flags = ["--tls-cert", self.f("server.crt"), "--tls-key", self.f("server.key")]
        return flags + (["--tls-client-ca", self.f("ca.crt")] if client_ca else [])

    def test_https_on_every_listener_and_plaintext_counted_as_a_failed_handshake(self):
        settings = self.f("settings.yaml")  # the flags from a settings file, as every serve flag
        with open(settings, "w") as f:
            f.write("tls-cert: %s\ntls-key: %s\n" % (self.f("server.crt"), self.f("server.key")))
        s = self.serve(["--settings", settings], grpc=WITH_GRPC)
        r = curl("--cacert", self.f("ca.crt"), "https://127.0.0.1:%d/healthz" % s.http_port)
        self.assertEqual(r.stdout, '{"status":"ok"}', r.stderr)
        r = curl("--cacert", self.f("ca.crt"), "https://localhost:%d/metrics" % s.admin_port)
        self.assertIn("ratekeeper_build_info", r.stdout, r.stderr)  # the admin listener speaks TLS too
        self.assertNotEqual(curl("http://127.0.0.1:%d/healthz" % s.http_port).returncode, 0)
        metrics = curl("--cacert", self.f("ca.crt"), "https://127.0.0.1:%d/metrics" % s.admin_port).stdout
        self.assertIn('ratekeeper_bad_requests_total{protocol="http",reason="tls_handshake"} 1', metrics)
        if WITH_GRPC:
            import grpc
            ca = self.read("ca.crt")
            self.assertEqual(grpc_health(s.grpc_port, grpc.ssl_channel_credentials(ca)), b"\x08\x01")
            with grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port) as plain:
                with self.assertRaises(grpc.RpcError):
                    plain.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=3)

    def test_client_certificates_are_required_with_tls_client_ca(self):
        s = self.serve(self.tls_flags(client_ca=True), grpc=WITH_GRPC, client_cert=True)
        url = "https://127.0.0.1:%d/healthz" % s.http_port
        ca = ["--cacert", self.f("ca.crt")]
        self.assertEqual(curl(*ca, "--cert", self.f("client.crt"), "--key", self.f("client.key"), url).stdout,
                         '{"status":"ok"}')
        self.assertNotEqual(curl(*ca, url).returncode, 0)
        self.assertNotEqual(curl(*ca, "--cert", self.f("other.crt"), "--key", self.f("other.key"), url).returncode, 0)
        if WITH_GRPC:
            import grpc
            read = self.read
            good = grpc.ssl_channel_credentials(read("ca.crt"), read("client.key"), read("client.crt"))
            self.assertEqual(grpc_health(s.grpc_port, good), b"\x08\x01")
            for creds in (grpc.ssl_channel_credentials(read("ca.crt")),
                          grpc.ssl_channel_credentials(read("ca.crt"), read("other.key"), read("other.crt"))):
                with self.assertRaises(grpc.RpcError):
                    grpc_health(s.grpc_port, creds)

    def test_a_rotated_certificate_is_served_to_new_connections_while_open_ones_go_on(self):
        s = self.serve(self.tls_flags(), grpc=WITH_GRPC)
        before = s.connection()
        self.assertEqual(s.request("GET", "/healthz", conn=before)[0], 200)
        self.assertEqual(before.sock.getpeercert()["serialNumber"], "01")
        if WITH_GRPC:
            import grpc
            old_ca = self.read("ca.crt")
            open_channel = grpc.secure_channel("127.0.0.1:%d" % s.grpc_port, grpc.ssl_channel_credentials(old_ca))
            health = open_channel.unary_unary("/grpc.health.v1.Health/Check")
            self.assertEqual(health(b"", timeout=10), b"\x08\x01")
        # A certificate manager's rotation: a new key and certificate (serial 2), from another CA, so that which one
        # a connection gets shows in what its client must trust.
        make_certs(self.dir, "server", "2", "other-ca")
        new_ctx = context(self.f("other-ca.crt"))

        def new_connection_sees_it(admin=False):
            conn = s.connection(admin, new_ctx)
            try:
                conn.connect()
                return conn.sock.getpeercert()["serialNumber"] == "02"
            except ssl.SSLCertVerificationError:  # this listener still serves the old one
                return False
            finally:
                conn.close()
        wait_until(new_connection_sees_it, "the rotated certificate on a new HTTPS connection")
        # The admin listener takes the files just after the public one (Listeners::reload_tls_if_rotated), and the
        # reload is counted once both have.
        wait_until(lambda: new_connection_sees_it(True), "the rotated certificate on a new admin connection")
        sock = before.sock
        self.assertEqual(s.request("GET", "/healthz", conn=before)[0], 200)  # the same connection, still served
        self.assertIs(before.sock, sock)
        before.close()

        def reload_counted():
            admin = s.connection(True, new_ctx)
            try:
                metrics = s.request("GET", "/metrics", conn=admin)[2].decode()
            finally:
                admin.close()
            return re.search(r'ratekeeper_tls_reloads_total\{result="success"\} [1-9]', metrics) is not None
        wait_until(reload_counted, "the reload counted in ratekeeper_tls_reloads_total")
        if WITH_GRPC:
            other_ca = self.read("other-ca.crt")
            # gRPC takes the pair the reload hands it at its next refresh, a second at most after the others.
            wait_until(lambda: grpc_health(s.grpc_port, grpc.ssl_channel_credentials(other_ca)) == b"\x08\x01",
                       "the rotated certificate on a new gRPC connection", retry_on=(grpc.RpcError,))
            self.assertEqual(health(b"", timeout=10), b"\x08\x01")  # the channel opened before goes on
            open_channel.close()

    def test_a_key_written_before_its_certificate_keeps_the_old_pair_on_every_listener(self):
        s = self.serve(self.tls_flags(), grpc=WITH_GRPC)
        # The next pair (serial 2, from the other CA), made aside; then the key lands first, its certificate later.
        aside = self.f("next")
        os.mkdir(aside)
        for name in ("ca.crt", "ca.key", "other-ca.crt", "other-ca.key"):
            shutil.copy(self.f(name), os.path.join(aside, name))
        make_certs(aside, "server", "2", "other-ca")
        os.replace(os.path.join(aside, "server.key"), self.f("server.key"))
        old_ctx, new_ctx = context(self.f("ca.crt")), context(self.f("other-ca.crt"))
        if WITH_GRPC:
            import grpc
            old_creds = grpc.ssl_channel_credentials(self.read("ca.crt"))
            new_creds = grpc.ssl_channel_credentials(self.read("other-ca.crt"))

        def serial(admin=False, ctx=old_ctx):
            conn = s.connection(admin, ctx)
            try:
                conn.connect()
                return conn.sock.getpeercert()["serialNumber"]
            finally:
                conn.close()
        # Longer than the files' watch and gRPC's refresh (a second each): every listener has looked at the
        # mismatched pair by then, and new handshakes still get the old one.
        gap_end = time.monotonic() + 3.5
        while time.monotonic() < gap_end:
            self.assertEqual(serial(), "01")
            self.assertEqual(serial(admin=True), "01")
            if WITH_GRPC:
                self.assertEqual(grpc_health(s.grpc_port, old_creds), b"\x08\x01")
            time.sleep(0.1)
        refused = [json.loads(line) for line in s.output().splitlines()
                   if "not reloaded" in line]
        self.assertTrue(refused, s.output())
        self.assertIn(self.f("server.key"), refused[0]["error"])
        self.assertIn(self.f("server.crt"), refused[0]["error"])
        # The certificate lands: new handshakes get the new pair, on every listener.
        os.replace(os.path.join(aside, "server.crt"), self.f("server.crt"))
        wait_until(lambda: serial(ctx=new_ctx) == "02", "the new pair on a new HTTPS connection",
                   retry_on=(OSError, ssl.SSLError))
        wait_until(lambda: serial(admin=True, ctx=new_ctx) == "02", "the new pair on a new admin connection",
                   retry_on=(OSError, ssl.SSLError))
        if WITH_GRPC:
            wait_until(lambda: grpc_health(s.grpc_port, new_creds) == b"\x08\x01",
                       "the new pair on a new gRPC connection", retry_on=(grpc.RpcError,))

    def test_plaintext_sent_to_the_grpc_tls_port_writes_a_bounded_log_of_json_lines(self):
        if not WITH_GRPC:
            self.skipTest("a build without gRPC")
        s = self.serve(self.tls_flags(), grpc=True)
        wait_until(lambda: socket.create_connection(("127.0.0.1", s.grpc_port)).close() is None, "gRPC to listen")
        connections = 300
        for _ in range(connections):
            c = socket.create_connection(("127.0.0.1", s.grpc_port), timeout=10)
            try:
                c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                c.recv(64)  # gRPC answers with a TLS alert, or closes
            except OSError:
                pass
            c.close()
        s.stop(must_stop=True)  # the counts of lines held back are written as it stops
        with open(os.path.join(self.dir, "log-%d" % s.http_port)) as f:
            log = f.read()
        lines = log.splitlines()
        for line in lines:
            json.loads(line)  # every line one JSON object
        entries = [json.loads(line) for line in lines]
        handshakes = [e for e in entries if "andshake" in e["msg"]]
        suppressed = [e for e in entries if e["msg"] == "log lines suppressed"]
        self.assertTrue(handshakes, log)
        self.assertLessEqual(len(handshakes), 10, log)
        self.assertLess(len(log), 16 * 1024, log)
        self.assertTrue(suppressed, log)
        self.assertEqual(len(handshakes) + sum(int(e["suppressed"]) for e in suppressed), connections, log)

    def test_handshakes_that_never_finish_exhaust_nothing(self):
        # One thread: a new connection sheds only its own thread's connections (an idle one, or one still in its
        # handshake), so with two, one landing on the thread that holds none would be refused until the others' header
        # timeout.
        s = self.serve(self.tls_flags() + ["--max-connections", "16", "--header-timeout", "500ms", "--threads", "1"],
                       grpc=WITH_GRPC)
        stalled = []
        for i in range(64):
            c = socket.create_connection(("127.0.0.1", s.http_port), timeout=10)
            if i % 2:
                c.sendall(b"\x16\x03\x01\x02\x00\x01")  # half a ClientHello's record header and more never comes
            stalled.append(c)
        began = time.monotonic()
        r = curl("--cacert", self.f("ca.crt"), "https://127.0.0.1:%d/healthz" % s.http_port)
        self.assertEqual(r.stdout, '{"status":"ok"}', r.stderr)
        self.assertLess(time.monotonic() - began, 5, "a real client waited behind stalled handshakes")
        for c in stalled:
            c.settimeout(10)
            try:
                self.assertEqual(c.recv(1), b"")  # closed: shed, or timed out at --header-timeout
            except ConnectionResetError:
                pass
            c.close()
        if WITH_GRPC:  # gRPC's listener closes a connection whose handshake does not end within --header-timeout
            c = socket.create_connection(("127.0.0.1", s.grpc_port), timeout=10)
            began = time.monotonic()
            try:
                self.assertEqual(c.recv(1), b"")
            except ConnectionResetError:
                pass
            self.assertGreaterEqual(time.monotonic() - began, 0.4)
            c.close()

    def test_bad_tls_and_token_flags_stop_the_start_naming_the_flag_and_the_file(self):
        empty = self.f("empty.token")
        with open(empty, "w") as f:
            f.write("\n")
        missing = self.f("missing.crt")
        port = free_port()
        cases = [
            (["--tls-key", self.f("server.key")], "--tls-key %s: needs --tls-cert" % self.f("server.key")),
            (["--tls-cert", self.f("server.crt")], "--tls-cert %s: needs --tls-key" % self.f("server.crt")),
            (["--tls-client-ca", self.f("ca.crt")], "--tls-client-ca %s: needs --tls-cert" % self.f("ca.crt")),
            (["--tls-cert", missing, "--tls-key", self.f("server.key")],
             "--tls-cert %s: cannot read: No such file or directory" % missing),
            (["--tls-cert", self.f("server.crt"), "--tls-key", self.f("client.key")],
             "--tls-key %s: does not match the certificate in %s" % (self.f("client.key"), self.f("server.crt"))),
            (["--tls-cert", self.f("server.key"), "--tls-key", self.f("server.key")],
             "--tls-cert %s: not a PEM certificate chain" % self.f("server.key")),
            (self.tls_flags() + ["--tls-client-ca", self.f("server.key")],
             "--tls-client-ca %s: " % self.f("server.key")),
            (["--admin-token-file", empty], "--admin-token-file: '%s' is empty" % empty),
            (["--admin-token-file", self.f("none")],
             "--admin-token-file: '%s' cannot be read: No such file or directory" % self.f("none")),
            (["--admin", "0.0.0.0:%d" % port], "--admin 0.0.0.0:%d: not a loopback address" % port),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = subprocess.run([BINARY, "serve", "--config", os.path.join(ROOT, "examples", "rules.yaml"),
                                    "--http", "127.0.0.1:%d" % free_port(), *args], capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("ratekeeper serve: " + message, r.stderr)
                if "--admin" in args:
                    self.assertIn("--admin-token-file", r.stderr)

    def token_file(self, text=TOKEN, name="admin.token"):
        path = self.f(name)
        with open(path, "w") as f:
            f.write(text + "\n")  # the trailing newline is not part of the token
        return path

    def start_refused(self, *args):
        """`ratekeeper serve ARGS` on a free public port: its exit status and stderr. One that starts instead is
        stopped, and fails the test."""
        p = subprocess.Popen([BINARY, "serve", "--config", os.path.join(ROOT, "examples", "rules.yaml"),
                              "--http", "127.0.0.1:%d" % free_port(), *args],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("ratekeeper serve %s started" % " ".join(args))
        return p.returncode, err

    def test_a_short_token_or_one_in_clear_text_off_loopback_stops_the_start(self):
        for text in ("x", "0123456789abcde"):  # 1 and 15 bytes: a guess away
            path = self.token_file(text, "short.token")
            code, err = self.start_refused("--admin", "127.0.0.1:%d" % free_port(), "--admin-token-file", path)
            self.assertEqual(code, 2, err)
            self.assertIn("ratekeeper serve: --admin-token-file: '%s' is %d byte%s long; it must be at least 16 "
                          "bytes" % (path, len(text), "" if len(text) == 1 else "s"), err)
        token = self.token_file()
        admin = "0.0.0.0:%d" % free_port()
        code, err = self.start_refused("--admin", admin, "--admin-token-file", token)
        self.assertEqual(code, 2, err)
        self.assertIn("ratekeeper serve: --admin %s: not a loopback address, and without --tls-cert the admin token "
                      "would cross the network in clear text" % admin, err)
        self.assertIn("--admin-allow-plaintext-token", err)
        # Over TLS it starts; in clear text only when asked for (a TLS-terminating proxy in front, say), by the flag
        # or its setting.
        self.serve(["--admin-token-file", token] + self.tls_flags(), admin_address="0.0.0.0")
        self.serve(["--admin-token-file", token, "--admin-allow-plaintext-token"], tls=False, admin_address="0.0.0.0")
        settings = self.f("settings.yaml")
        with open(settings, "w") as f:
            f.write("admin-token-file: %s\nadmin-allow-plaintext-token: true\n" % token)
        self.serve(["--settings", settings], tls=False, admin_address="0.0.0.0")

    def test_wrong_tokens_from_one_address_are_throttled_and_another_address_is_not(self):
        s = self.serve(["--admin-token-file", self.token_file()], tls=False)
        conn = s.connection(admin=True)
        right = {"Authorization": "Bearer " + TOKEN}
        statuses, retry_after, right_answers = [], set(), []
        began = time.monotonic()
        for i in range(300):
            status, h, _ = s.request("GET", "/v1/rules", admin=True, conn=conn,
                                     headers={"Authorization": "Bearer wrong-guess-%03d" % i})
            statuses.append(status)
            if status == 429:
                retry_after.add(int(h["Retry-After"]))
                if not right_answers:
                    # The right token from the throttled address waits too: a guess that comes right is not told
                    # so (asserted when it is sent well within the wait: the wait is over Retry-After - 1 s).
                    sent = time.monotonic()
                    right_answers.append(s.request("GET", "/v1/rules", admin=True, conn=conn, headers=right)[0])
                    if time.monotonic() - sent < int(h["Retry-After"]) - 1:
                        self.assertEqual(right_answers[0], 429)
        elapsed = time.monotonic() - began
        conn.close()
        self.assertEqual(statuses[:10], [401] * 10)  # a few typing mistakes are answered as ever
        self.assertEqual(statuses.count(401) + statuses.count(429), 300)
        self.assertLessEqual(statuses.count(401), 10 + 1 + int(elapsed / 6), "one more guess every 6 s")
        self.assertTrue(retry_after and min(retry_after) >= 1 and max(retry_after) <= 6, retry_after)
        # Another address (127.0.0.2 is loopback too) is not throttled.
        other = http.client.HTTPConnection("127.0.0.1", s.admin_port, timeout=10, source_address=("127.0.0.2", 0))
        self.assertEqual(s.request("GET", "/v1/rules", admin=True, conn=other, headers=right)[0], 200)
        self.assertEqual(s.request("GET", "/v1/rules", admin=True, conn=other,
                                   headers={"Authorization": "Bearer wrong"})[0], 401)
        status, _, body = s.request("GET", "/metrics", admin=True, conn=other, headers=right)
        other.close()
        throttled = statuses.count(429) + right_answers.count(429)
        self.assertIn('ratekeeper_bad_requests_total{protocol="admin",reason="throttled"} %d' % throttled,
                      body.decode())

    def test_admin_token(self):
        token = self.token_file()
        s = self.serve(["--admin-token-file", token, "--admin-allow-plaintext-token"], tls=False,
                       admin_address="0.0.0.0")  # not loopback: allowed with a token, in clear text when asked for
        self.assertEqual(s.request("GET", "/healthz", admin=True)[0], 200)  # probes carry no token
        self.assertEqual(s.request("GET", "/readyz", admin=True)[0], 200)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer " + TOKEN + "x"},
                        {"Authorization": "Basic " + TOKEN}, {"Cookie": "ratekeeper_admin_session=nope"}):
            status, h, body = s.request("GET", "/v1/rules", admin=True, headers=headers)
            self.assertEqual(status, 401, headers)
            self.assertEqual(dict(h)["WWW-Authenticate"], 'Bearer realm="ratekeeper admin"')
            self.assertEqual(json.loads(body)["error"]["reason"], "unauthorized")
        status, _, body = s.request("GET", "/v1/rules", admin=True, headers={"Authorization": "Bearer " + TOKEN})
        self.assertEqual(status, 200)
        self.assertIn("domains", json.loads(body))
        r = curl("-H", "Authorization: bearer " + TOKEN, "http://127.0.0.1:%d/metrics" % s.admin_port)
        self.assertIn("ratekeeper_bad_requests_total{protocol=\"admin\",reason=\"unauthorized\"} 5", r.stdout)

        # The dashboard in a browser: the page answers with the login form, which sets the cookie.
        status, h, body = s.request("GET", "/ui", admin=True)
        self.assertEqual(status, 401)
        self.assertIn(b'<form method="post" action="/ui/login">', body)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        self.assertEqual(s.request("POST", "/ui/login", admin=True, headers=form, body="token=wrong")[0], 401)
        status, h, _ = s.request("POST", "/ui/login", admin=True, headers=form, body="token=" + TOKEN)
        self.assertEqual(status, 303)
        h = dict(h)
        self.assertEqual(h["Location"], "/ui")
        # The cookie is a signed session, not the token: a stolen cookie expires and never tells the token.
        session = re.fullmatch(r"ratekeeper_admin_session=([^;]+); Path=/; Max-Age=43200; HttpOnly; SameSite=Strict",
                               h["Set-Cookie"])
        self.assertIsNotNone(session, h["Set-Cookie"])
        session = session.group(1)
        self.assertNotIn(TOKEN, session)
        cookie = {"Cookie": "theme=dark; ratekeeper_admin_session=" + session}
        self.assertEqual(s.request("GET", "/ui", admin=True, headers=cookie)[0], 200)
        self.assertEqual(s.request("GET", "/v1/admin/hot-keys", admin=True, headers=cookie)[0], 200)
        forged = session[:-1] + ("0" if session[-1] != "0" else "1")
        for value in (TOKEN, forged):  # the token itself is no session; nor is a session's signature altered
            self.assertEqual(s.request("GET", "/ui", admin=True,
                                       headers={"Cookie": "ratekeeper_admin_session=" + value})[0], 401)
        # Another site's page cannot log a browser in (its Origin is refused before the token is looked at).
        status, _, _ = s.request("POST", "/ui/login", admin=True, body="token=" + TOKEN,
                                 headers=dict(form, Origin="https://evil.example"))
        self.assertEqual(status, 403)

        # A rotated token takes effect at the next request: the old one (and its cookie) is refused.
        with open(token + ".new", "w") as f:
            f.write(TOKEN + "-rotated\n")
        os.replace(token + ".new", token)
        self.assertEqual(s.request("GET", "/v1/rules", admin=True,
                                   headers={"Authorization": "Bearer " + TOKEN + "-rotated"})[0], 200)
        self.assertEqual(s.request("GET", "/v1/rules", admin=True, headers={"Authorization": "Bearer " + TOKEN})[0],
                         401)
        self.assertEqual(s.request("GET", "/ui", admin=True, headers=cookie)[0], 401)

    def test_the_documented_example(self):
        """docs/service.md's TLS example, its block marked `docs-test: by` this file, run as a reader would."""
        with open(DOC) as f:
            text = f.read()
        block = re.search(r"<!-- docs-test: by tests/integration/tls_test.py -->\n```sh\n(.*?)```", text, re.S)
        self.assertIsNotNone(block, "the TLS example of docs/service.md")
        h, a = free_port(), free_port()
        # As tests/docs/docs_test.py runs a documented serve line: on free ports rather than 8080 and 9090.
        script = block.group(1).replace(":8080", ":%d" % h).replace(":9090", ":%d" % a).replace(
            "ratekeeper serve ", "ratekeeper serve --http 127.0.0.1:%d --admin 127.0.0.1:%d " % (h, a))
        os.symlink(os.path.join(ROOT, "examples"), self.f("examples"))
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(BINARY)) + ":" + os.environ["PATH"])
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.dir, env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('{"status":"ok"}', r.stdout)


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    WITH_GRPC = sys.argv.pop(1) == "grpc"
    unittest.main()
