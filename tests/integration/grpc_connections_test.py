#!/usr/bin/python3
"""Idle HTTP/2 connections cannot exhaust `ratekeeper serve --grpc` (docs/security.md, "Connections and streams"):
the real binary under an RLIMIT_NOFILE of 256, flooded from many loopback addresses (127/8) with connections that
send HTTP/2's preface and a SETTINGS frame and then nothing, in plaintext and over TLS. Meanwhile /healthz, the admin
listener and a new gRPC client must be answered, and the gRPC listener must hold no more than its caps. Without the
caps the flood holds every descriptor the process may open, and the HTTP and admin listeners stop answering.
Run by ctest: grpc_connections_test.py BINARY PROTO_DIR. Ports are free ports, files live in a temporary directory,
every process started is stopped by its pid.
"""
import http.client
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import grpc_test  # noqa: E402  (the .proto files' Python classes, made as that test makes them)
import harness  # noqa: E402  (tests/support: the shared helpers)
from harness import free_port, wait_until  # noqa: E402

BINARY = None
rls = None
HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_CERTS = os.path.join(os.path.dirname(HERE), "support", "make_certs.sh")

OPEN_FILES = 256  # the server's RLIMIT_NOFILE: small, so that a flood of a few hundred connections would exhaust it
PER_IP = 8        # --max-connections-per-ip
FLOOD_ADDRESSES = 40  # x PER_IP connections each: more than the server may open files
# HTTP/2's client preface and an empty SETTINGS frame: what makes a connection established to gRPC.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
ANSWER_TIMEOUT = 5  # seconds for /healthz, the admin listener and a decision while the flood holds its connections

RULES = """
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
"""


class Conn:
    """One idle HTTP/2 connection from `source`: connected, its TLS handshake done (with `ctx`), the preface and
    SETTINGS sent, and then nothing. `held`: the server answered with its own SETTINGS and has not closed it."""

    def __init__(self, port, source, ctx):
        self.state, self.got, self.sock = "handshake", b"", None
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        except OSError:
            self.state = "closed"
            return
        raw.setblocking(False)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1", do_handshake_on_connect=False) if ctx else raw
        self.tls = ctx is not None
        self.step()

    def step(self):
        try:
            if self.state == "handshake":
                if self.tls:
                    self.sock.do_handshake()
                self.sock.send(PREFACE)
                self.state = "open"
            while self.state == "open":
                data = self.sock.recv(4096)
                if not data:
                    return self.close()
                self.got += data
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass  # not yet
        except (OSError, ssl.SSLError):
            self.close()

    def close(self):
        self.state = "closed"
        if self.sock:
            self.sock.close()

    @property
    def held(self):
        return self.state == "open" and len(self.got) > 0

    @property
    def pending(self):
        return self.state != "closed" and not self.held


def flood(port, sources, per_source, ctx=None):
    return {source: [Conn(port, source, ctx) for _ in range(per_source)] for source in sources}


def settle(conns, seconds=5.0):
    """Steps every connection until each is held or closed (bounded: a server out of descriptors leaves some in its
    backlog, neither)."""
    deadline = time.monotonic() + seconds
    while True:
        for c in conns:
            c.step()
        if not any(c.pending for c in conns) or time.monotonic() > deadline:
            return
        time.sleep(0.02)


class Serve(harness.Serve):
    """`ratekeeper serve --grpc` under RLIMIT_NOFILE OPEN_FILES, loopback's addresses counted per address (only ::1
    exempt), over TLS with `tls_dir`'s certificates."""

    def __init__(self, extra=(), tls_dir=None):
        self.grpc_port = free_port()
        self.tls_dir = tls_dir
        tls = ["--tls-cert", os.path.join(tls_dir, "server.crt"),
               "--tls-key", os.path.join(tls_dir, "server.key")] if tls_dir else []
        super().__init__(BINARY, RULES, [*tls, "--max-connections-per-ip", str(PER_IP),
                                         "--per-ip-exempt", "::1", *extra], open_files=OPEN_FILES)

    def more_args(self):
        return ["--grpc", "127.0.0.1:%d" % self.grpc_port]

    def context(self):
        return ssl.create_default_context(cafile=os.path.join(self.tls_dir, "ca.crt")) if self.tls_dir else None

    def connection(self, admin=False, timeout=10):
        port = self.admin_port if admin else self.http_port
        if not self.tls_dir:
            return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=self.context())

    def wait_ready(self):
        wait_until(lambda: self.request("GET", "/readyz", admin=True)[0] == 200, "ratekeeper to be ready",
                   retry_on=(OSError, ssl.SSLError, http.client.HTTPException), interval=0.05)

    def answers(self, admin):
        """/healthz's status within ANSWER_TIMEOUT, or the error that kept it from answering."""
        try:
            return self.request("GET", "/healthz", admin=admin, conn=self.connection(admin, ANSWER_TIMEOUT))[0]
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            return repr(e)

    def decide(self, user):
        """A new gRPC client's decision (its overall code's name), or the error that kept it from one. The client
        connects again if its connection is closed at once, as gRPC clients do: until the flood's connections have
        been idle for 100 ms (acceptor.h's kMinQuiet) none gives way to it."""
        target = "127.0.0.1:%d" % self.grpc_port
        if self.tls_dir:
            with open(os.path.join(self.tls_dir, "ca.crt"), "rb") as f:
                channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(f.read()))
        else:
            channel = grpc.insecure_channel(target)
        with channel:
            should = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                         request_serializer=rls.RateLimitRequest.SerializeToString,
                                         response_deserializer=rls.RateLimitResponse.FromString)
            r = rls.RateLimitRequest(domain="edge")
            r.descriptors.add().entries.add(key="user", value=user)
            try:
                answer = should(r, timeout=ANSWER_TIMEOUT, wait_for_ready=True)
                return rls.RateLimitResponse.Code.Name(answer.overall_code)
            except grpc.RpcError as e:
                return e.code().name

    def sample(self, series):
        """One series' value on /metrics (0 if absent)."""
        text = self.request("GET", "/metrics", admin=True)[2].decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(series + " "))

    def logged(self, msg):
        """The fields of the log lines whose msg is `msg`."""
        lines = [json.loads(line) for line in self.output().splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("msg") == msg]


class IdleConnectionFloodTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rk-grpc-conns-")
        subprocess.run(["sh", MAKE_CERTS, cls.dir], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def flood_and_check(self, s, cap, ctx=None):
        sources = ["127.0.%d.%d" % (1 + i // 200, 1 + i % 200) for i in range(FLOOD_ADDRESSES)]
        started = time.monotonic()
        conns = flood(s.grpc_port, sources, PER_IP, ctx)
        every = [c for cs in conns.values() for c in cs]
        settle(every)
        print("%d connections from %d addresses in %.1f s" % (len(every), len(sources), time.monotonic() - started),
              file=sys.stderr)
        try:
            # (b) Everyone else is answered while the flood holds what it can.
            self.assertEqual(s.answers(admin=False), 200, "/healthz on the public listener")
            self.assertEqual(s.answers(admin=True), 200, "/healthz on the admin listener")
            self.assertEqual(s.decide("new-client"), "OK", "a new gRPC client's decision")
            # (a) The gRPC listener holds no more than its cap, nor more than PER_IP from one address.
            settle(every)
            held = [c for c in every if c.held]
            self.assertGreater(len(held), 0)
            self.assertLessEqual(len(held), cap)
            for source, cs in conns.items():
                self.assertLessEqual(sum(c.held for c in cs), PER_IP, source)
            self.assertLessEqual(s.metric("ratekeeper_grpc_connections"), cap)
            self.assertGreater(s.sample('ratekeeper_bad_requests_total{protocol="grpc",reason="too_many_connections"}'),
                               0)
        finally:
            for c in every:
                if c.state != "closed":
                    c.close()

    def test_plaintext_flood_within_the_default_caps_lowered_to_fit(self):
        s = Serve()
        try:
            budget = s.logged("file descriptors")[0]
            self.assertEqual(budget["open_files"], str(OPEN_FILES))
            cap = int(budget["grpc_max_connections"])
            # The defaults (10,000 each) do not fit in 256 descriptors: each is lowered, with a warning.
            self.assertLess(cap, FLOOD_ADDRESSES * PER_IP)
            warnings = [line["warning"] for line in s.logged("connection cap lowered to fit the open files limit")]
            self.assertTrue(any(w.startswith("--grpc-max-connections lowered from its default 10000 to %d: " % cap)
                                for w in warnings), warnings)
            self.flood_and_check(s, cap)
        finally:
            s.stop(must_stop=True)

    def test_tls_flood(self):
        s = Serve(["--grpc-max-connections", "20"], tls_dir=self.dir)
        try:
            ctx = s.context()
            ctx.set_alpn_protocols(["h2"])
            self.flood_and_check(s, 20, ctx)
        finally:
            s.stop(must_stop=True)

    def test_one_address_holds_no_more_than_its_share(self):
        s = Serve(["--grpc-max-connections", "20"])
        try:
            conns = flood(s.grpc_port, ["127.0.0.2"], 3 * PER_IP)["127.0.0.2"]
            settle(conns)
            self.assertEqual(sum(c.held for c in conns), PER_IP)
            self.assertEqual(sum(c.state == "closed" for c in conns), 2 * PER_IP)
            self.assertEqual(s.decide("from-127.0.0.1"), "OK")  # another address is served
            self.assertEqual(s.sample('ratekeeper_bad_requests_total{protocol="grpc",'
                                      'reason="too_many_connections_from_ip"}'), 2 * PER_IP)
            for c in conns:
                if c.state != "closed":
                    c.close()
        finally:
            s.stop(must_stop=True)


class CapsPastTheOpenFilesLimitTest(unittest.TestCase):
    """A cap given that the descriptors the process may open cannot hold stops serve before it listens (exit 2),
    naming the flag."""

    def serve(self, *flags):
        d = tempfile.mkdtemp(prefix="rk-grpc-conns-")
        try:
            with open(os.path.join(d, "rules.yaml"), "w") as f:
                f.write(RULES)
            return subprocess.run(
                [BINARY, "serve", "--config", os.path.join(d, "rules.yaml"), "--http", "127.0.0.1:%d" % free_port(),
                 "--admin", "127.0.0.1:%d" % free_port(), "--grpc", "127.0.0.1:%d" % free_port(), *flags],
                capture_output=True, text=True, timeout=20,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES)))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_each_cap_given_is_checked(self):
        for flags, named in [(["--max-connections", "10000"], "--max-connections 10000: "),
                             (["--grpc-max-connections", "100"], "--grpc-max-connections 100: "),
                             (["--max-connections", "60", "--grpc-max-connections", "30"],
                              "--max-connections 60 with --grpc-max-connections 30: ")]:
            r = self.serve(*flags)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("ratekeeper serve: " + named + "more connections than there are file descriptors for: "
                          "the process may open %d files (RLIMIT_NOFILE)" % OPEN_FILES, r.stderr)


if __name__ == "__main__":
    BINARY, grpc_test.PROTO_DIR = os.path.abspath(sys.argv.pop(1)), os.path.abspath(sys.argv.pop(1))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this process opens the flood's connections
    out = tempfile.mkdtemp(prefix="rk-pb2-")
    try:
        rls, _ = grpc_test.generate(out)
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(out, ignore_errors=True)
