#!/usr/bin/python3
"""The nginx module in Debian's real nginx: load_module, a master and two workers sharing one zone, real HTTP
clients. Run by ctest: nginx_module_test.py path/to/ngx_http_ratekeeper_module.so

Each test writes an nginx.conf in a temporary directory, starts nginx on a free port, and stops it at the end.
"""
import http.client
import http.server
import os
import select
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
from harness import free_port, wait_until  # noqa: E402  (tests/support: the shared helpers)
from serve_test import NGINX, Upstream  # noqa: E402  (this directory)

MODULE = None

CONF = """
load_module %(module)s;
%(user)s
daemon off;
master_process on;
worker_processes 2;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log info;
events { worker_connections 512; }
http {
    client_body_temp_path %(dir)s/body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
    log_format rl '$pid $uri $status $ratekeeper_decision';
    access_log %(dir)s/access.log rl;
    root %(dir)s/html;
%(http)s
    server {
        # reuseport: a socket per worker, connections spread by the kernel's hash, so both workers answer even on a
        # busy machine (one shared socket let one worker accept every connection of a burst now and then).
        listen 127.0.0.1:%(port)d reuseport;
        location = /rk-probe { add_header X-Rk-Probe %(token)s; return 204; }
%(server)s
    }
}
"""


class Nginx:
    def __init__(self, http_block, server_block):
        self.dir = tempfile.mkdtemp(prefix="rk-ngx-module-")
        for d in ("html/a", "html/b", "html/c", "html/dry", "html/key"):
            os.makedirs(os.path.join(self.dir, d))
            with open(os.path.join(self.dir, d, "index.html"), "w") as f:
                f.write("ok\n")
        self.conf = os.path.join(self.dir, "nginx.conf")
        # A free port may be taken by another process before nginx binds it; then whatever listens there answers
        # (seen: a 200 to every path, from another test's server). So nginx is known by a token of its own, and
        # started again on another port when its port was taken.
        token = os.urandom(8).hex()
        for _ in range(5):
            self.port = free_port()
            with open(self.conf, "w") as f:
                f.write(CONF % {"module": MODULE, "dir": self.dir, "port": self.port, "http": http_block,
                                "server": server_block, "user": "user root;" if os.geteuid() == 0 else "",
                                "token": token})
            self.proc = subprocess.Popen([NGINX, "-c", self.conf, "-p", self.dir], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
            try:
                wait_until(lambda: self.proc.poll() is not None or
                           self.get("/rk-probe")[1].get("X-Rk-Probe") == token, "nginx to answer", 15)
            except AssertionError:
                self.proc.kill()
            if self.proc.poll() is None:
                break
            self.proc.wait()
            if not os.path.exists(os.path.join(self.dir, "error.log")) or \
                    "Address already in use" not in self.log("error.log"):
                break
        try:
            assert self.proc.poll() is None
            wait_until(lambda: self.get("/a/")[0] in (200, 429, 503), "nginx to answer", 15)
        except AssertionError:
            self.stop()
            raise AssertionError("nginx did not answer: " + self.stderr) from None

    def get(self, path, headers=None, conn=None):
        own = conn is None
        if own:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            r.read()
            return r.status, dict(r.getheaders())
        finally:
            if own:
                conn.close()

    def log(self, name="access.log"):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def workers(self):
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # What nginx said before its error_log took over its stderr: why it would not start, if it did not.
        self.stderr = self.proc.stderr.read()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def hammer(nginx, path, attempts, threads=8):
    """`attempts` requests from several threads on kept-alive connections; returns the statuses."""
    statuses = []
    lock = threading.Lock()

    def run(n):
        conn = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=10)
        mine = [nginx.get(path, conn=conn)[0] for _ in range(n)]
        conn.close()
        with lock:
            statuses.extend(mine)

    ts = [threading.Thread(target=run, args=(attempts // threads,)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return statuses


ZONES = """
    ratekeeper_zone zone=bucket:1m algorithm=token_bucket rate=1r/h capacity=100;
    ratekeeper_zone zone=abuse:1m algorithm=earrrl rate=1r/s half_life=10s;
    ratekeeper_zone zone=keys:1m algorithm=gcra rate=1r/h burst=2 key_size=16;
    ratekeeper_zone zone=queue:1m algorithm=leaky_queue rate=1r/s burst=2;
"""
LOCATIONS = """
        location /a/ { ratekeeper zone=bucket key=$binary_remote_addr; }
        location /b/ { ratekeeper zone=abuse key=$binary_remote_addr; ratekeeper_status 503; }
        location /c/ { ratekeeper zone=abuse key=c$binary_remote_addr; ratekeeper_headers off; }
        location /dry/ { ratekeeper zone=keys key=dry$binary_remote_addr; ratekeeper_dry_run on; }
        location /key/ { ratekeeper zone=keys key=$http_x_api_key; }
        location /queue/ { ratekeeper zone=queue key=$binary_remote_addr; empty_gif; }
"""


class ModuleTest(unittest.TestCase):
    def setUp(self):
        self.nginx = Nginx(ZONES, LOCATIONS)

    def tearDown(self):
        self.nginx.stop()

    def test_two_workers_share_one_limit_exactly(self):
        # setUp's probe spent one: 99 left of the bucket's 100, refilled at 1 an hour.
        statuses = hammer(self.nginx, "/a/", 400, threads=16)
        self.assertEqual(statuses.count(200), 99, statuses.count(429))
        self.assertEqual(statuses.count(429), 301)
        pids = set(line.split()[0] for line in self.nginx.log().splitlines() if " /a/" in line)
        self.assertEqual(len(pids), 2, "both workers answered")
        self.assertIn("refused", self.nginx.log())

    def test_earrrl_burst_then_refusal_with_headers_and_status(self):
        statuses = [self.nginx.get("/b/") for _ in range(40)]
        codes = [s for s, _ in statuses]
        first = codes.index(503)
        # A burst of limit / lambda = 1 / (ln 2 / 10) ~ 14.4 before the estimate passes 1/s.
        self.assertEqual(first, 15, codes)
        self.assertTrue(all(c == 503 for c in codes[first:]), codes)  # refused attempts keep counting
        ok_headers, no_headers = statuses[0][1], statuses[first][1]
        self.assertEqual(ok_headers["RateLimit-Policy"], '"abuse";q=1;w=1')
        self.assertRegex(ok_headers["RateLimit"], r'^"abuse";r=13;t=\d+$')  # earrrl's 13.43 left, floored
        self.assertEqual(ok_headers["X-RateLimit-Remaining"], "13")
        self.assertNotIn("Retry-After", ok_headers)
        self.assertGreaterEqual(int(no_headers["Retry-After"]), 1)
        self.assertTrue(no_headers["RateLimit"].startswith('"abuse";r=0;t='))
        status, headers = self.nginx.get("/c/")
        self.assertEqual(status, 200)
        self.assertNotIn("RateLimit", headers)  # ratekeeper_headers off

    def test_dry_run_refuses_nothing_and_says_what_it_would_have_done(self):
        codes = [self.nginx.get("/dry/")[0] for _ in range(6)]
        self.assertEqual(codes, [200] * 6)
        def decisions():
            return [line.split()[3] for line in self.nginx.log().splitlines() if " /dry/" in line]
        # Each worker writes its line after its answer, so the lines may come late and out of order.
        wait_until(lambda: len(decisions()) >= 6, "the access log's lines", 10)
        self.assertEqual(sorted(decisions()), ["allowed"] * 3 + ["dry_run"] * 3)
        self.assertIn('would refuse', self.nginx.log("error.log"))
        _, headers = self.nginx.get("/dry/")  # would refuse: the fields as applied, so no Retry-After on a 200
        self.assertEqual(headers["RateLimit"], '"keys";r=0;t=10800')
        self.assertNotIn("Retry-After", headers)

    def test_keys_from_a_header_are_independent_and_no_key_is_not_limited(self):
        for key in ("alpha", "beta", "k" * 16):
            codes = [self.nginx.get("/key/", {"X-Api-Key": key})[0] for _ in range(4)]
            self.assertEqual(codes, [200, 200, 200, 429], key)
        self.assertEqual([self.nginx.get("/key/")[0] for _ in range(5)], [200] * 5)

    def test_keys_longer_than_key_size_are_limited_each_on_its_own(self):
        # Regression (issue 19): with key_size=16 a longer key was let through unlimited, with an error-log line per
        # request. Now it is limited under its keyed digest. The two keys share their first 199 bytes, so a module
        # that cut keys to key_size (or to any prefix) would count them as one.
        first, second = "k" * 199 + "1", "k" * 199 + "2"
        for key in (first, second):
            statuses = [self.nginx.get("/key/", {"X-Api-Key": key}) for _ in range(4)]
            self.assertEqual([s for s, _ in statuses], [200, 200, 200, 429], key[-1])
            self.assertEqual(statuses[3][1]["RateLimit"], '"keys";r=0;t=3600')
        self.assertEqual(self.nginx.get("/key/", {"X-Api-Key": first})[0], 429)
        self.assertEqual(self.nginx.get("/key/", {"X-Api-Key": "k" * 16})[0], 200)  # not the digests' count
        self.assertNotIn("key_size", self.nginx.log("error.log"))

    def test_header_fields_are_the_services_format_exactly(self):
        # gcra 1 an hour with burst 2: q is the rate (1 per 3600 s), not burst + 1; t counts down from 3600 s per
        # request spent; the refusal says when one more passes. The same strings as ratekeeper serve's
        # (tests/http_fields/rate_limit_headers_test.cc holds the formatter's golden cases;
        # tests/server/api/forward_auth_test.cc forward-auth's).
        answers = [self.nginx.get("/key/", {"X-Api-Key": "golden"}) for _ in range(4)]
        self.assertEqual([s for s, _ in answers], [200, 200, 200, 429])
        fields = ("RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                  "Retry-After")
        got = [{k: h[k] for k in fields if k in h} for _, h in answers]
        self.assertEqual(got[0], {"RateLimit-Policy": '"keys";q=1;w=3600', "RateLimit": '"keys";r=2;t=3600',
                                  "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "2",
                                  "X-RateLimit-Reset": "3600"})
        self.assertEqual(got[2]["RateLimit"], '"keys";r=0;t=10800')
        self.assertEqual(got[3], {"RateLimit-Policy": '"keys";q=1;w=3600', "RateLimit": '"keys";r=0;t=3600',
                                  "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0",
                                  "X-RateLimit-Reset": "3600", "Retry-After": "3600"})

    def test_leaky_queue_holds_each_admitted_request_for_its_delay(self):
        # Regression: the module let leaky_queue's admitted requests through at once, dropping their delay, so the
        # queue was gcra. Rate 1/s, burst 2: of four requests at once, three leave 0, 1 and 2 s after the first
        # decision (limit_req's queue without nodelay) and one is refused: two wait behind the first. Lower bounds
        # only, with half a second to spare: nginx's timers count from its cached clock, which may lag a little.
        # (That a dry run delays nothing, differential.nginx finds: its dry runs would wait hours.)
        start, done, lock = time.monotonic(), [], threading.Lock()

        def run():
            status = self.nginx.get("/queue/")[0]
            with lock:
                done.append((status, time.monotonic() - start))

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(s for s, _ in done), [200, 200, 200, 429])
        took = sorted(t for s, t in done if s == 200)
        self.assertTrue(all(t >= w for t, w in zip(took, [0, 0.5, 1.5])), took)

    def test_state_survives_a_reload_and_a_killed_worker(self):
        hammer(self.nginx, "/a/", 200)
        self.assertEqual(self.nginx.get("/a/")[0], 429)
        old = set(self.nginx.workers())
        os.kill(self.nginx.proc.pid, signal.SIGHUP)
        wait_until(lambda: set(self.nginx.workers()).isdisjoint(old) and len(self.nginx.workers()) == 2,
                   "new workers after the reload", 15)
        self.assertEqual(self.nginx.get("/a/")[0], 429)
        victim = self.nginx.workers()[0]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: victim not in self.nginx.workers() and len(self.nginx.workers()) == 2,
                   "the master to replace the killed worker", 15)
        self.assertEqual([self.nginx.get("/a/")[0] for _ in range(10)], [429] * 10)
        self.assertNotIn("[emerg]", self.nginx.log("error.log"))


class SlowUpstream(http.server.BaseHTTPRequestHandler):
    """An application that takes ?t= seconds to answer, or less if nginx closes the connection first, and counts the
    requests it is serving at once: what nginx let through and has not finished. Each stops counting itself before
    it answers, since nginx may give the slot to another request as soon as it has the answer. `release` ends every
    wait at once (the test's end)."""
    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    now = most = served = 0
    release = threading.Event()

    def do_GET(self):
        with SlowUpstream.lock:
            SlowUpstream.now += 1
            SlowUpstream.most = max(SlowUpstream.most, SlowUpstream.now)
        counted, end = True, time.monotonic() + float(self.path.partition("?t=")[2] or 0)
        try:
            while time.monotonic() < end and not SlowUpstream.release.is_set():
                if select.select([self.connection], [], [], 0.05)[0] and not self.connection.recv(1, socket.MSG_PEEK):
                    return  # nginx closed it: its request ended
            with SlowUpstream.lock:
                SlowUpstream.now -= 1
                SlowUpstream.served += 1
            counted = False
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        finally:
            if counted:
                with SlowUpstream.lock:
                    SlowUpstream.now -= 1

    def log_message(self, *args):
        pass

    @classmethod
    def reset(cls):
        with cls.lock:
            cls.most = cls.served = 0
        cls.release.clear()


class Backlogged(http.server.ThreadingHTTPServer):
    request_queue_size = 256  # a hundred connections at once are all accepted, none left to the SYN retry
    daemon_threads = True


CONCURRENCY_ZONES = """
    ratekeeper_zone zone=inflight:1m algorithm=concurrency max_in_flight=10 lease_ttl=%s;
"""
CONCURRENCY_LOCATIONS = """
        location /slow/ { ratekeeper zone=inflight key=all; proxy_pass http://127.0.0.1:%(up)d; }
        location /tried/ { ratekeeper zone=inflight key=all; try_files /nowhere @app; }
        location @app { proxy_pass http://127.0.0.1:%(up)d; }
        location /again/ { ratekeeper zone=inflight key=all; rewrite ^/again/(.*)$ /slow/$1 last; }
"""


class ConcurrencyTest(unittest.TestCase):
    """algorithm=concurrency through the real nginx, two workers, in front of a slow application: at most 10 in
    flight, each slot given back when its request ends however it ends, and after lease_ttl when its worker died."""

    def start(self, ttl="60s"):
        SlowUpstream.reset()
        upstream = Backlogged(("127.0.0.1", 0), SlowUpstream)
        threading.Thread(target=upstream.serve_forever, daemon=True).start()
        self.addCleanup(upstream.server_close)
        self.addCleanup(upstream.shutdown)
        self.addCleanup(SlowUpstream.release.set)
        self.nginx = Nginx(CONCURRENCY_ZONES % ttl, CONCURRENCY_LOCATIONS % {"up": upstream.server_address[1]})
        self.addCleanup(self.nginx.stop)

    def hold(self, path, n):
        """n requests sent on raw sockets and left waiting for their answers; the sockets."""
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.nginx.port), timeout=10)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
            socks.append(s)
        return socks

    def status(self, path):
        return self.nginx.get(path)[0]

    def test_a_hundred_concurrent_slow_requests_never_have_more_than_ten_in_flight(self):
        self.start()
        statuses, lock = [], threading.Lock()
        deadline = time.monotonic() + 3

        def client():
            while time.monotonic() < deadline:
                status = self.status("/slow/?t=0.2")
                with lock:
                    statuses.append(status)
                if status == 429:
                    time.sleep(0.05)

        samples = []
        threads = [threading.Thread(target=client) for _ in range(100)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):  # the application's count, sampled throughout
            samples.append(SlowUpstream.now)
            time.sleep(0.01)
        for t in threads:
            t.join()
        self.assertLessEqual(SlowUpstream.most, 10, "more than 10 in flight at once")
        self.assertEqual(max(samples), 10 if SlowUpstream.most == 10 else max(samples))
        self.assertEqual(SlowUpstream.most, 10, "the slots were all used")
        self.assertEqual(statuses.count(200), SlowUpstream.served)  # the refused never reached the application
        self.assertGreater(statuses.count(200), 20)  # slots came back as requests ended, again and again
        self.assertGreater(statuses.count(429), 0)
        self.assertEqual(set(statuses), {200, 429})
        pids = set(line.split()[0] for line in self.nginx.log().splitlines() if " /slow/" in line)
        self.assertEqual(len(pids), 2, "both workers answered")
        # Every slot is free again: ten at once pass.
        socks = self.hold("/slow/?t=30", 10)
        wait_until(lambda: SlowUpstream.now == 10, "ten requests in flight", 10)
        status, headers = self.nginx.get("/slow/")
        self.assertEqual(status, 429)
        self.assertGreaterEqual(int(headers["Retry-After"]), 50)  # until the first of 60 s leases expires
        self.assertNotIn("RateLimit", headers)  # a concurrency zone has no rate to tell
        for s in socks:
            s.close()

    def test_a_client_that_disconnects_mid_request_frees_its_slot(self):
        self.start()
        socks = self.hold("/slow/?t=30", 10)
        wait_until(lambda: SlowUpstream.now == 10, "ten requests in flight", 10)
        self.assertEqual(self.status("/slow/"), 429)
        start = time.monotonic()
        for s in socks:
            s.close()
        # Far sooner than the application's 30 s (or the lease's 60 s): nginx notices each client go and ends its
        # request (499), which gives the slot back.
        wait_until(lambda: SlowUpstream.now == 0, "the application to see the requests end", 10)
        socks = self.hold("/slow/?t=30", 10)
        wait_until(lambda: SlowUpstream.now == 10, "ten requests in flight again", 10)
        self.assertLess(time.monotonic() - start, 15)
        self.assertEqual(self.status("/slow/"), 429)
        for s in socks:
            s.close()
        wait_until(lambda: " /slow/ 499 " in self.nginx.log(), "the aborted requests logged as 499", 10)

    def test_internal_redirects_take_one_slot_and_give_it_back(self):
        self.start()
        # try_files to a named location, and a rewrite into another location with the same limit: each request
        # takes one slot (not one per location it passes), keeps it through the redirect, and gives it back.
        for path in ("/tried/?t=30", "/again/?t=30"):
            with self.subTest(path):
                socks = self.hold(path, 10)
                wait_until(lambda: SlowUpstream.now == 10, "ten redirected requests in flight", 10)
                self.assertEqual(self.status(path), 429)
                for s in socks:
                    s.close()
                wait_until(lambda: SlowUpstream.now == 0, "the requests to end", 10)
                results = []
                threads = [threading.Thread(target=lambda: results.append(self.status(path.replace("30", "0.3"))))
                           for _ in range(10)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self.assertEqual(results, [200] * 10)
        self.assertEqual(self.status("/slow/"), 200)

    def test_slots_held_across_a_reload_count_and_come_back(self):
        self.start()
        socks = self.hold("/slow/?t=30", 10)
        wait_until(lambda: SlowUpstream.now == 10, "ten requests in flight", 10)
        old = set(self.nginx.workers())
        os.kill(self.nginx.proc.pid, signal.SIGHUP)
        wait_until(lambda: len(set(self.nginx.workers()) - old) == 2, "new workers after the reload", 15)
        # The old workers still serve their ten; the new ones count them (one zone, kept across the reload).
        self.assertEqual(self.status("/slow/"), 429)
        for s in socks:
            s.close()
        wait_until(lambda: self.status("/slow/") == 200, "the old workers' slots to come back", 10)
        self.assertNotIn("starts afresh", self.nginx.log("error.log"))

    def test_a_killed_workers_slots_come_back_after_the_lease_ttl(self):
        ttl = 4
        self.start("%ds" % ttl)
        start = time.monotonic()
        socks = self.hold("/slow/?t=60", 10)
        wait_until(lambda: SlowUpstream.now == 10, "ten requests in flight", 10)
        old = set(self.nginx.workers())
        for pid in old:  # every worker dies holding its leases; the master starts new ones
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: set(self.nginx.workers()).isdisjoint(old) and len(self.nginx.workers()) == 2,
                   "the master to replace the killed workers", 15)
        for s in socks:
            s.close()
        refused = self.status("/slow/")
        waited = time.monotonic() - start
        if waited < ttl - 0.5:  # on a machine fast enough to ask before the leases could have expired
            self.assertEqual(refused, 429, "the dead workers' leases still count until their lease_ttl")
        wait_until(lambda: self.status("/slow/") == 200, "the slots to come back after lease_ttl", ttl + 10)
        self.assertGreaterEqual(time.monotonic() - start, ttl - 0.1)
        results = []
        threads = [threading.Thread(target=lambda: results.append(self.status("/slow/?t=0.3"))) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [200] * 10, "all ten slots came back")
        self.assertNotIn("[emerg]", self.nginx.log("error.log"))


class DocExampleTest(unittest.TestCase):
    """docs/nginx.md's example as a user runs it: its nginx.conf, started by its command (daemonized, in a directory
    of its own) and stopped by the same command with -s quit. What a test must change, and only that: the module's
    path (the doc's is the .deb's, here the one built, as the doc says a source build names it), the application's
    and nginx's ports (free ones), and the directory (a temporary one)."""

    def blocks(self):
        doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "nginx.md")
        with open(doc) as f:
            parts = f.read().split("<!-- docs-test: by tests/integration/nginx_module_test.py -->\n```")[1:]
        found = {}
        for part in parts:
            lang, _, rest = part.partition("\n")
            found[lang] = rest.split("```", 1)[0]
        return found["sh"].strip(), found["nginx"]

    def test_the_example_runs_as_written(self):
        command, conf = self.blocks()
        self.assertIn("load_module /usr/lib/nginx/modules/ngx_http_ratekeeper_module.so;", conf)  # the .deb's
        upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=upstream.serve_forever, daemon=True).start()
        self.addCleanup(upstream.server_close)
        self.addCleanup(upstream.shutdown)
        cwd = tempfile.mkdtemp(prefix="rk-ngx-doc-")
        self.addCleanup(shutil.rmtree, cwd, True)
        prefix = os.path.join(cwd, "rk-nginx")
        port = free_port()
        with open(os.path.join(cwd, "nginx.conf"), "w") as f:
            f.write(conf.replace("/usr/lib/nginx/modules/ngx_http_ratekeeper_module.so", os.path.abspath(MODULE))
                    .replace("127.0.0.1:8000", "127.0.0.1:%d" % upstream.server_address[1])
                    .replace("127.0.0.1:8888", "127.0.0.1:%d" % port))
        command = command.replace("/tmp/rk-nginx", prefix)
        pid_file = os.path.join(prefix, "nginx.pid")

        def quit_nginx():  # as the doc says; by its pid if that failed
            subprocess.run(["bash", "-c", command + " -s quit"], cwd=cwd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
            try:
                wait_until(lambda: not os.path.exists(pid_file), "nginx to quit", 15)
            except AssertionError:
                with open(pid_file) as f:
                    os.kill(int(f.read()), signal.SIGKILL)
                raise
        self.addCleanup(quit_nginx)
        # The daemon keeps the stderr it was given (error_log stderr): a file, not a pipe that would never end.
        with open(os.path.join(cwd, "stderr"), "w+") as err:
            r = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, timeout=60)
            err.seek(0)
            self.assertEqual(r.returncode, 0, err.read())

        def get(path):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                return resp.status, dict(resp.getheaders())
            finally:
                conn.close()
        wait_until(lambda: get("/search/ready")[0] == 200, "the example's nginx to answer", 15)
        before = Upstream.hits
        # EARRRL at 10 a second with a half-life of 10 s lets a burst of about 10 / (ln 2 / 10) = 144 through.
        answers = [get("/api/x") for _ in range(200)]
        codes = [c for c, _ in answers]
        self.assertEqual(codes[0], 200)
        self.assertIn(429, codes)
        refused = answers[codes.index(429)][1]
        self.assertTrue(refused["RateLimit"].startswith('"per_ip";r=0;t='), refused)
        self.assertGreaterEqual(int(refused["Retry-After"]), 1)
        self.assertEqual([get("/search/x")[0] for _ in range(5)], [200] * 5)  # a dry run refuses nothing
        def log():
            with open(os.path.join(prefix, "ratekeeper.log")) as f:
                return f.read()
        wait_until(lambda: "dry_run" in log(), "the dry run's decisions in ratekeeper.log", 15)
        log = log()
        self.assertIn('"GET /api/x HTTP/1.1" 200 allowed', log)
        self.assertIn('"GET /api/x HTTP/1.1" 429 refused', log)
        self.assertIn('"GET /search/x HTTP/1.1" 200 dry_run', log)
        self.assertEqual(Upstream.hits - before, codes.count(200) + 5)  # the refused never reached the application


class BrokenConfigTest(unittest.TestCase):
    def check(self, http_block, server_block, expected):
        d = tempfile.mkdtemp(prefix="rk-ngx-t-")
        try:
            conf = os.path.join(d, "nginx.conf")
            with open(conf, "w") as f:
                f.write(CONF % {"module": MODULE, "dir": d, "port": free_port(), "http": http_block,
                                "server": server_block, "user": "", "token": "t"})
            out = subprocess.run([NGINX, "-t", "-c", conf, "-p", d], capture_output=True, text=True, timeout=30)
            self.assertNotEqual(out.returncode, 0, out.stderr)
            self.assertIn(expected, out.stderr)
            self.assertRegex(out.stderr, r"nginx\.conf:\d+")  # and where
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_each_broken_directive_fails_nginx_t_with_a_message(self):
        loc = "location / { ratekeeper zone=z key=$binary_remote_addr; }"
        for zone_line, expected in [
            ("ratekeeper_zone zone=z:1m algorithm=magic rate=1r/s;", "algorithm: 'magic'"),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=fast;", 'rate "fast" is not like 10r/s'),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=-1r/s;", "limit"),
            ("ratekeeper_zone zone=z:1m algorithm=earrrl rate=1r/s;", "half_life"),
            ("ratekeeper_zone zone=z:1m algorithm=sliding_log rate=1r/s;", "sliding_log"),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=1r/s key_size=0;", "key_size 0"),
            ("ratekeeper_zone zone=z:1k algorithm=gcra rate=1r/s;", 'zone "z" size "1k"'),
            ("ratekeeper_zone zone=z algorithm=gcra rate=1r/s;", "is not NAME:SIZE"),
            ("ratekeeper_zone algorithm=gcra rate=1r/s;", "zone=NAME:SIZE is required"),
            ("ratekeeper_zone zone=z:1m algorithm=gcra;", "rate= is required"),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=1r/s colour=blue;", 'unknown parameter "colour=blue"'),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=1r/s half_life=soon;", 'half_life "soon"'),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=1r/s count_refused=maybe;", "count_refused"),
            ("ratekeeper_zone zone=other:1m algorithm=gcra rate=1r/s;", 'zone "z" is not declared'),
            ("ratekeeper_zone zone=z:1m algorithm=concurrency;",
             "max_in_flight= is required with algorithm=concurrency"),
            ("ratekeeper_zone zone=z:1m algorithm=concurrency max_in_flight=10 rate=1r/s;",
             "algorithm=concurrency takes max_in_flight= and lease_ttl=, not rate="),
            ("ratekeeper_zone zone=z:1m algorithm=concurrency max_in_flight=0;",
             'max_in_flight "0" is not from 1 to 4096'),
            ("ratekeeper_zone zone=z:1m algorithm=concurrency max_in_flight=5000;", "is not from 1 to 4096"),
            ("ratekeeper_zone zone=z:1m algorithm=concurrency max_in_flight=10 lease_ttl=48h;", "lease_ttl: must be"),
            ("ratekeeper_zone zone=z:1m algorithm=concurrency max_in_flight=10 lease_ttl=soon;", 'lease_ttl "soon"'),
            ("ratekeeper_zone zone=z:1m algorithm=gcra rate=1r/s max_in_flight=3;",
             "max_in_flight= is for algorithm=concurrency"),
        ]:
            with self.subTest(zone_line):
                self.check("    " + zone_line, "        " + loc, expected)
        zone = "    ratekeeper_zone zone=z:1m algorithm=gcra rate=1r/s;"
        for location, expected in [
            ("location / { ratekeeper zone=z; }", "invalid number of arguments"),
            ("location / { ratekeeper zone=z cost=2; }", "zone=NAME and key=VALUE are both required"),
            ("location / { ratekeeper zone=z key=$x cost=lots; }", 'cost "cost=lots"'),
            ("location / { ratekeeper zone=z key=$binary_remote_addr speed=1; }", 'unknown parameter "speed=1"'),
            ("location / { ratekeeper zone=z key=$binary_remote_addr; ratekeeper_status 200; }", "value must be"),
        ]:
            with self.subTest(location):
                self.check(zone, "        " + location, expected)
        self.check("    ratekeeper_zone zone=z:1m algorithm=concurrency max_in_flight=2;",
                   "        location / { ratekeeper zone=z key=$binary_remote_addr cost=2; }",
                   'zone "z" is a concurrency zone: a request takes one slot, cost= does not apply')


if __name__ == "__main__":
    MODULE = sys.argv.pop(1)
    unittest.main(verbosity=2)
