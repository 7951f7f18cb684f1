#!/usr/bin/python3
"""The proxy examples as a user copies them (issue 16 item 7, issue 21 items 2 and 5): ratekeeper serve with
examples/rules.yaml, a small upstream, and Debian's real nginx (examples/nginx/nginx.conf, auth_request) or Caddy
(examples/caddy/Caddyfile, forward_auth) in front, each started by the commands docs/proxies.md shows. The only
edits are the ones a user makes: the ports (free loopback ports here) and the nginx -p directory; the fail-closed
tests make the edit the example's header describes. docs/proxies.md's blocks marked
`<!-- docs-test: by tests/integration/proxies_test.py -->` are read from the Markdown itself: the config fragments
must be the example files' own lines (docs/nginx.md's example is run by tests/integration/nginx_module_test.py).

Run by ctest: proxies_test.py BINARY. Every process started here is stopped by its pid.
"""
import http.client
import http.server
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import free_port, stop, wait_until  # noqa: E402  (tests/support: the shared helpers)

import yaml

BINARY = None
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CADDY = shutil.which("caddy") or "/usr/bin/caddy"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MARK = "<!-- docs-test: by tests/integration/proxies_test.py -->"
SKIP = "<!-- docs-test: skip"

# The ports the examples are written with, and what each is.
RATEKEEPER, APP, PROXY, FALLBACK = "127.0.0.1:8080", "127.0.0.1:8000", "127.0.0.1:8888", "127.0.0.1:8889"
# The example's own timeout for an answer from ratekeeper (nginx's proxy_*_timeout, Caddy's
# response_header_timeout), checked against the files below.
AUTH_TIMEOUT_S = 1.0


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def fenced_blocks(markdown_path):
    """(marker line or "", info string, text) of every fenced block of a Markdown file."""
    blocks, lines = [], read(markdown_path).split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(```+)\s*(\S*)", lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2)
        prev = lines[i - 1].strip() if i > 0 else ""
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        blocks.append((prev if prev.startswith("<!-- docs-test:") else "", info, "\n".join(lines[i + 1:j]) + "\n"))
        i = j + 1
    return blocks


def marked(markdown_path, info):
    return [text for mark, lang, text in fenced_blocks(markdown_path) if mark == MARK and lang == info]


def read_log(f):
    f.flush()
    f.seek(0)
    return f.read()


class App(http.server.BaseHTTPRequestHandler):
    """The application behind the proxy: counts what reaches it."""
    protocol_version = "HTTP/1.1"
    hits = []
    lock = threading.Lock()

    def do_GET(self):
        with App.lock:
            App.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"app")

    def log_message(self, *args):
        pass


def get(port, path, source="127.0.0.1", headers=None, timeout=10):
    """One request from a given loopback address (127.0.0.0/8 is all ours: each address is another client)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        conn.close()


class ProxyCase:
    """What every proxy example must do; a subclass per proxy starts it as docs/proxies.md says."""
    name = None  # the --proxy value, and the docs' shell block that starts it

    def commands(self):
        """The docs' commands for this proxy: the `ratekeeper serve` line and the proxy's own."""
        for block in marked("docs/proxies.md", "sh"):
            lines = [l.strip() for l in block.split("\n") if l.strip() and not l.strip().startswith("#")]
            serve = [l for l in lines if l.startswith("ratekeeper serve") and "--proxy " + self.name in l]
            if serve:
                return serve[0], lines
        raise AssertionError("docs/proxies.md has no marked sh block starting ratekeeper with --proxy " + self.name)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rk-proxies-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.ports = {RATEKEEPER: free_port(), APP: free_port(), PROXY: free_port(), FALLBACK: free_port()}
        App.hits = []
        app = http.server.ThreadingHTTPServer(("127.0.0.1", self.ports[APP]), App)
        threading.Thread(target=app.serve_forever, daemon=True).start()
        self.addCleanup(app.server_close)
        self.addCleanup(app.shutdown)
        self.serve_line, self.doc_lines = self.commands()
        self.start_ratekeeper()

    def with_ports(self, text):
        for written, port in self.ports.items():
            text = text.replace(written, "127.0.0.1:%d" % port)
        return text

    def start_ratekeeper(self):
        argv = shlex.split(self.with_ports(self.serve_line).rstrip("&").strip())
        argv[0] = BINARY
        # The admin listener's default port is another port to swap.
        argv += ["--admin", "127.0.0.1:%d" % free_port(), "--drain", "0s"]  # stopped at once at the end
        self.rk_log = open(os.path.join(self.dir, "ratekeeper.log"), "w+")
        self.addCleanup(self.rk_log.close)
        self.ratekeeper = subprocess.Popen(argv, cwd=ROOT, stdout=self.rk_log, stderr=subprocess.STDOUT)
        self.addCleanup(stop, self.ratekeeper)
        port = self.ports[RATEKEEPER]
        wait_until(lambda: get(port, "/readyz")[0] == 200, "ratekeeper to be ready")

    def config(self):
        return read(*self.example)

    def start_proxy(self, conf):
        """Starts the proxy (launch, per proxy) and waits until it answers. A port taken by another process between
        free_port() and the proxy's bind gets other ports (bounded: 3 tries)."""
        for _ in range(3):
            proc = self.launch(conf)
            wait_until(lambda: proc.poll() is not None or self.through("/probe")[0] > 0, self.name + " to serve")
            if proc.poll() is None:
                App.hits = []
                return
            log = read_log(self.proxy_log)
            self.assertIn("in use", log)
            self.ports[PROXY], self.ports[FALLBACK] = free_port(), free_port()
        self.fail(self.name + " found no free port in 3 tries")

    def through(self, path, source="127.0.0.1", headers=None):
        return get(self.ports[PROXY], path, source, headers)

    # The behaviour a user wants, the same through every proxy.

    def test_allowed_requests_reach_the_app_and_a_refusal_is_a_429_with_the_fields(self):
        self.start_proxy(self.config())
        # examples/rules.yaml: /login, 10 in any 90 s (sliding_log), per path prefix.
        for i in range(10):
            self.assertEqual(self.through("/login", "127.0.0.3")[0], 200, i)
        self.assertEqual(App.hits, ["/login"] * 10)
        status, headers, body = self.through("/login", "127.0.0.3")
        self.assertEqual(status, 429, headers)
        t = int(headers["retry-after"])
        self.assertTrue(80 < t <= 90, headers)  # the oldest of the 10 leaves the 90 s log within 90 s
        self.assertEqual(headers["ratelimit"], '"path=/login";r=0;t=%d' % t)
        self.assertIn('"path=/login";q=10;w=90', headers["ratelimit-policy"])
        self.assertIn('"per_client";q=5;w=1', headers["ratelimit-policy"])
        self.assertEqual(headers["content-type"], "application/problem+json")
        self.assertIn(b'"status":429', body)
        self.assertEqual(len(App.hits), 10)  # the refused request never reached the app
        # The limit is the path's (examples/rules.yaml keys it by path prefix alone): another path passes.
        self.assertEqual(self.through("/about", "127.0.0.3")[0], 200)

    def test_a_client_that_keeps_hammering_stays_refused_and_others_pass(self):
        self.start_proxy(self.config())
        # per_client: EARRRL, 5 a second, half-life 2 s: a burst of about 14 at once, then refusals while the
        # client keeps coming (its refused attempts count). Bounded: 60 requests.
        statuses = [self.through("/", "127.0.0.2")[0] for _ in range(60)]
        first_refusal = statuses.index(429)
        self.assertTrue(10 <= first_refusal <= 40, statuses)
        self.assertEqual(set(statuses[:first_refusal]), {200}, statuses)
        self.assertEqual(statuses[first_refusal:first_refusal + 10], [429] * 10, statuses)
        self.assertEqual(len(App.hits), statuses.count(200))
        self.assertEqual(self.through("/", "127.0.0.5")[0], 200)

    def test_what_the_client_sends_changes_neither_its_address_nor_its_path(self):
        self.start_proxy(self.config())
        spoof = lambda i: {"X-Forwarded-For": "198.51.100.%d" % i, "X-Real-IP": "198.51.100.%d" % i,
                           "X-Original-URI": "/other%d" % i, "X-Forwarded-Uri": "/other%d" % i}
        # The path is the one the proxy routes: /login's 10 in 90 s, whatever URI headers the client adds.
        for i in range(10):
            self.assertEqual(self.through("/login", "127.0.0.6", spoof(i))[0], 200, i)
        self.assertEqual(self.through("/login", "127.0.0.6", spoof(10))[0], 429)
        # The address is the connection's: a new X-Forwarded-For or X-Real-IP on each request is no fresh key.
        statuses = [self.through("/", "127.0.0.8", spoof(i))[0] for i in range(60)]
        self.assertIn(429, statuses)
        self.assertTrue(10 <= statuses.index(429) <= 40, statuses)

    def test_fails_open_when_ratekeeper_is_stopped(self):
        self.start_proxy(self.config())
        self.assertEqual(self.through("/a")[0], 200)
        stop(self.ratekeeper)
        for path in ("/b", "/c", "/login"):
            self.assertEqual(self.through(path)[0], 200, path)
        self.assertEqual(App.hits, ["/a", "/b", "/c", "/login"])

    def test_fails_open_within_its_timeout_when_ratekeeper_hangs(self):
        self.start_proxy(self.config())
        self.assertEqual(self.through("/a")[0], 200)
        self.ratekeeper.send_signal(signal.SIGSTOP)  # accepts connections (the kernel does), answers nothing
        self.addCleanup(self.ratekeeper.send_signal, signal.SIGCONT)
        start = time.monotonic()
        self.assertEqual(self.through("/b")[0], 200)
        self.assertLess(time.monotonic() - start, AUTH_TIMEOUT_S + 2.0)
        self.assertEqual(App.hits, ["/a", "/b"])

    def test_fails_closed_after_the_edit_the_example_describes(self):
        self.start_proxy(self.fail_closed(self.config()))
        self.assertEqual(self.through("/a")[0], 200)
        stop(self.ratekeeper)
        self.assertEqual(self.through("/b")[0], self.closed_status)
        self.assertEqual(App.hits, ["/a"])

    def test_keepalive_to_ratekeeper_ends_before_ratekeepers_idle_timeout(self):
        """ratekeeper closes an idle kept-alive connection after 60 s, and after --busy-idle-timeout (default 5 s)
        while it is busy (serve --help); the proxy must give its idle connections up first, or it may send a request
        on a connection ratekeeper is closing."""
        usage = subprocess.run([BINARY, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"--busy-idle-timeout DUR[^(]*\(default (\d+)s\)", usage)
        self.assertTrue(m, usage)
        self.assertLess(self.keepalive_seconds(self.config()), int(m.group(1)))


class NginxTest(ProxyCase, unittest.TestCase):
    name = "nginx"
    example = ("examples", "nginx", "nginx.conf")
    closed_status = 500

    def launch(self, conf):
        """The docs' `mkdir -p DIR && nginx -p DIR -e stderr -c CONF`, with DIR a temporary directory and CONF the
        example with its ports swapped; in the foreground (-g 'daemon off;') so that it is stopped by its pid."""
        line = [l for l in self.doc_lines if " nginx -p " in l or l.startswith("nginx -p ")]
        self.assertEqual(len(line), 1, self.doc_lines)
        argv = shlex.split(line[0].split("&&")[-1])
        prefix = argv[argv.index("-p") + 1]
        conf_path = os.path.join(self.dir, "nginx.conf")
        with open(conf_path, "w") as f:
            f.write(self.with_ports(conf))
        argv = [NGINX if a == "nginx" else self.dir if a == prefix else conf_path if a.endswith("nginx.conf") else a
                for a in argv] + ["-g", "daemon off;" + (" user root;" if os.geteuid() == 0 else "")]
        self.proxy_log = open(os.path.join(self.dir, "nginx.log"), "w+")
        self.addCleanup(self.proxy_log.close)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.proxy_log)
        self.addCleanup(stop, proc, signal.SIGQUIT)
        return proc

    def fail_closed(self, conf):
        line = "      error_page 500 502 503 504 = @ratekeeper_down;\n"
        self.assertIn(line, conf)
        self.assertIn("delete the `error_page 500 502 503 504` line", conf)
        return conf.replace(line, "")

    def keepalive_seconds(self, conf):
        m = re.search(r"upstream ratekeeper \{[^}]*keepalive_timeout (\d+)s;", conf)
        self.assertTrue(m, "examples/nginx/nginx.conf: no keepalive_timeout in upstream ratekeeper")
        return int(m.group(1))

    def test_without_turning_429_into_403_nginx_answers_500(self):
        """Why the example maps ratekeeper's 429: auth_request takes only 2xx, 401 and 403 (issue 16 item 7)."""
        conf = self.config()
        line = "      error_page 429 = @refused;\n"
        self.assertIn(line, conf)
        self.start_proxy(conf.replace(line, ""))
        for _ in range(10):
            self.through("/login", "127.0.0.7")
        self.assertEqual(self.through("/login", "127.0.0.7")[0], 500)

    def test_the_timeouts_are_the_documented_one(self):
        conf = self.config()
        for directive in ("proxy_connect_timeout", "proxy_send_timeout", "proxy_read_timeout"):
            self.assertIn("%s %ds;" % (directive, AUTH_TIMEOUT_S), conf)


class CaddyTest(ProxyCase, unittest.TestCase):
    name = "caddy"
    example = ("examples", "caddy", "Caddyfile")
    closed_status = 502

    def launch(self, conf):
        """The docs' `caddy run --adapter caddyfile --config FILE`, FILE the example with its ports swapped. Caddy
        keeps its data under $XDG_DATA_HOME and $XDG_CONFIG_HOME: a temporary directory here."""
        line = [l for l in self.doc_lines if l.startswith("caddy run")]
        self.assertEqual(len(line), 1, self.doc_lines)
        conf_path = os.path.join(self.dir, "Caddyfile")
        with open(conf_path, "w") as f:
            f.write(self.with_ports(conf))
        argv = [CADDY if a == "caddy" else conf_path if a.endswith("Caddyfile") else a for a in shlex.split(line[0])]
        env = dict(os.environ, HOME=self.dir, XDG_DATA_HOME=os.path.join(self.dir, "data"),
                   XDG_CONFIG_HOME=os.path.join(self.dir, "config"))
        self.proxy_log = open(os.path.join(self.dir, "caddy.log"), "w+")
        self.addCleanup(self.proxy_log.close)
        proc = subprocess.Popen(argv, stdout=self.proxy_log, stderr=subprocess.STDOUT, env=env)
        self.addCleanup(stop, proc)
        return proc

    def fail_closed(self, conf):
        """The header: delete the fallback upstream from the forward_auth line, and the @ratekeeper_failed lines."""
        self.assertIn("delete `127.0.0.1:8889` from the forward_auth line and the\n# @ratekeeper_failed lines", conf)
        out = conf.replace("forward_auth 127.0.0.1:8080 127.0.0.1:8889 {", "forward_auth 127.0.0.1:8080 {")
        out = re.sub(r"\t\t@ratekeeper_failed status 5xx\n\t\thandle_response @ratekeeper_failed \{\n[^}]*\}\n", "",
                     out)
        self.assertNotIn("ratekeeper_failed", out.split("}", 1)[1])
        return out

    def keepalive_seconds(self, conf):
        m = re.search(r"transport http \{[^}]*\n\t\t\tkeepalive (\d+)s\n", conf)
        self.assertTrue(m, "examples/caddy/Caddyfile: no keepalive in forward_auth's transport")
        return int(m.group(1))

    def test_the_timeouts_are_the_documented_one(self):
        conf = self.config()
        for directive in ("dial_timeout", "response_header_timeout"):
            self.assertIn("%s %ds\n" % (directive, AUTH_TIMEOUT_S), conf)


class DocsTest(unittest.TestCase):
    """docs/proxies.md's config fragments are the example files' lines, so what the doc shows is what the tests
    above run."""

    def assert_fragment_of(self, fragment, example):
        lines = [l.strip() for l in fragment.strip("\n").split("\n")]
        body = [l.strip() for l in read(*example).split("\n")]
        found = any(body[i:i + len(lines)] == lines for i in range(len(body) - len(lines) + 1))
        self.assertTrue(found, "docs/proxies.md shows lines that are not in %s:\n%s" % ("/".join(example), fragment))

    def test_proxies_doc_fragments_are_the_examples_lines(self):
        for info, example in (("nginx", ("examples", "nginx", "nginx.conf")),
                              ("caddyfile", ("examples", "caddy", "Caddyfile"))):
            blocks = marked("docs/proxies.md", info)
            self.assertTrue(blocks, info)
            for block in blocks:
                self.assert_fragment_of(block, example)

    def test_traefik_and_envoy_blocks_are_the_examples_and_parse(self):
        """Not run here (no Traefik or Envoy in Debian): the doc's blocks are the example files' lines, and the
        files are YAML."""
        examples = {"traefik": [("examples", "traefik", "traefik.yaml"), ("examples", "traefik", "dynamic.yaml")],
                    "envoy": [("examples", "envoy", "envoy.yaml")]}
        for files in examples.values():
            for f in files:
                self.assertIsInstance(yaml.safe_load(read(*f)), dict, f)
        skipped = [(mark, text) for mark, info, text in fenced_blocks("docs/proxies.md")
                   if mark.startswith(SKIP) and info == "yaml"]
        self.assertGreaterEqual(len(skipped), 3)
        for mark, text in skipped:
            candidates = examples["envoy" if "envoy" in mark.lower() else "traefik"]
            lines = [l.strip() for l in text.strip("\n").split("\n")]
            ok = any(any([l.strip() for l in read(*f).split("\n")][i:i + len(lines)] == lines
                         for i in range(len(read(*f).split("\n")))) for f in candidates)
            self.assertTrue(ok, "docs/proxies.md block not in %s:\n%s" % (candidates, text))


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
