#!/usr/bin/env python3
"""docs.snippets: every fenced block of README.md and docs/*.md, and every file of examples/, run as a reader would
run it, against the built binaries and real servers (as Rust's doctests and Go's examples keep their docs true).

  docs_test.py --source SRC --binary RATEKEEPER --build BUILD_DIR [--static-lib A --shared-lib SO]
               [--nginx-module SO] [--only FILE[:LINE]] [--list]

What each block is and how it is run (README.md and docs/*.md; a block's language is its fence's first word):

  sh, console      run with bash in a scratch directory that looks like the repository: copies of examples/ and
                   docs/, links to scripts/, tests/, bench/, build/dev/ratekeeper (the binary under test) and
                   build/dev/tests (nothing a clone lacks: a path a doc names must exist in the repository), and
                   `ratekeeper` is first on PATH.
                   A block that needs what only some builds have (NEEDS below) is not run where it is missing.
                   Lines starting `$ ` are a transcript: each command (with its `\\` continuation lines) runs, must
                   exit 0, and what it prints must match the lines shown after it, where a line `...` stands for
                   any number of lines and `...` inside a line for any text. Without `$ `, the block runs as a
                   script and must exit 0.
                   A block that talks to :8080 or :9090 gets a fresh `ratekeeper serve --config examples/rules.yaml`
                   (what scripts/run starts), one that talks to :6379 a fresh redis-server, each on a free loopback
                   port written in place of the documented one. A line that starts `ratekeeper serve` is started,
                   must become ready, and must exit 0 on SIGTERM (its --http and --admin moved to free ports).
                   A transcript may start its own server instead: `$ ratekeeper serve ARGS &` is started as above
                   and serves the commands after it (its ports written in place of :8080 and :9090); it must exit 0
                   on SIGTERM at the end of the block.
  yaml             a rules file (`domain:`, or a fragment of one: `domain: docs_test` is put in front) must pass
                   `ratekeeper check-config`; a settings file (flag names) must start `serve --settings` and stop;
                   a scenario (`clients:`) must run through `ratekeeper simulate`.
  json             must parse (`...` and `[...]` stand for elided values). A fence `json POST /PATH` is a request:
                   it is sent to a fresh server (admin listener for /v1/admin/*) and must answer 200 or 429; the
                   next json block of the same section is its answer, compared by shape: the same keys at every
                   level, the same types, where the doc shows them (values vary: the server's clock, its state).
                   A fence `json GET /PATH` is an answer: after README's loop (20 forward-auth requests to domain
                   edge), a fresh server's answer to GET PATH is compared with it by shape.
  c, cpp           compiled and linked (not run) against the built library. A block without main() is the body of
                   one, after its #include lines; it may use the names a reader's program supplies: `key`, `key_len`, `spec`,
                   `reply(status, fields, n)`, `reply_429(retry_after)`.
  redis            a redis.conf fragment: a redis-server must start with it.
  nginx            `nginx -t` with the module under test (not run when the module was not built).
  (none)           a synopsis (every unindented line starts `ratekeeper CMD`): its flags must be exactly those of
                   `ratekeeper CMD --help`.

A block that cannot run here says so on the line before its fence:
  <!-- docs-test: skip REASON -->     not run (the reason is required)
  <!-- docs-test: by PATH -->         run by the test at PATH, which extracts it from the doc itself: PATH must
                                      exist and mention the doc's file name
Any other block (a language with no runner, no language) is a failure: say how to run it, or why it cannot be.
First of all, the test runs tests/docs/testdata/broken.md, a broken block of each kind, and fails unless it refuses
every one of them with the message expected.

examples/: rules files pass check-config; scenarios run through simulate; systemd/settings.yaml starts serve;
systemd/ratekeeper.service's install lines run into a temporary root, then its ExecStartPre and ExecStart run from
there, with /var/lib/NAME made for its StateDirectory=NAME as systemd makes it (and `systemd-analyze verify` reads
it, where installed); every other example must be named by a test under tests/ (examples/embed by
tests/package/install_test.sh, the proxies' configs by tests/integration/proxies_test.py).
CHANGELOG.md's newest version section must name the version CMakeLists.txt's project() sets.
A whole run takes about 15 s (10 s of it the dashboard's picture, where chromium and playwright-core are).
"""

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

COMMAND_TIMEOUT = 60  # seconds, any one command (a busy CI machine: the slowest, a compile, takes ~5 s idle)
READY_TIMEOUT = 30    # seconds for a server to answer after its start


@dataclass
class Block:
    doc: str          # path relative to the source tree
    line: int         # line of the opening fence
    lang: str
    info: list        # the fence's words after the language
    text: str
    marker: tuple = None  # ("skip", reason) | ("by", path) | None
    answer: "Block" = None  # for `json POST`: the block after it
    is_answer: bool = False
    end: int = 0      # index of the closing fence's line

    def where(self):
        return f"{self.doc}:{self.line}"


MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(\S+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})\s*(\S*)\s*(.*)$")


def parse_markdown(src, rel):
    lines = (src / rel).read_text().split("\n")
    blocks, errors = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if "docs-test:" in lines[i] and not MARKER.match(lines[i]):
                errors.append(f"{rel}:{i + 1}: malformed docs-test marker: {lines[i].strip()}")
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith(m.group(1)):
            end += 1
        if end == len(lines):
            errors.append(f"{rel}:{i + 1}: fence never closed")
            break
        b = Block(rel, i + 1, m.group(2).lower(), m.group(3).split(), "\n".join(lines[i + 1:end]) + "\n", end=end)
        mk = MARKER.match(lines[i - 1]) if i > 0 else None
        if mk:
            kind, arg = mk.group(1), mk.group(2)
            if kind not in ("skip", "by") or not arg:
                errors.append(f"{rel}:{i}: a docs-test marker is `skip REASON` or `by PATH`, not: "
                              + lines[i - 1].strip())
            b.marker = (kind, arg)
        if blocks and blocks[-1].lang == "json" and blocks[-1].info[:1] == ["POST"] and b.lang == "json" \
                and not blocks[-1].marker and not any(l.startswith("#") for l in lines[blocks[-1].end + 1:i]):
            blocks[-1].answer = b
            b.is_answer = True
        blocks.append(b)
        i = end + 1
    return blocks, errors


# ---------------------------------------------------------------------------------------------------------------
# Processes: servers on free loopback ports, stopped by pid.

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
from harness import free_port  # noqa: E402  (one way to pick a port, shared with the integration tests)


def stop_at_once(p):
    """SIGTERM, then SIGINT: the second signal ends serve's drain (--drain), so that it stops at once. Two of one
    signal might arrive as one, while the first is still pending."""
    p.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGINT)


def http(method, url, body=None, timeout=10):
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Servers:
    """Every process a block needed; stop() ends each by its pid."""

    def __init__(self, env):
        self.env = env
        self.procs = []
        self.ports = {}  # documented port -> free port

    def serve(self, args, log_name="serve"):
        """`ratekeeper serve ARGS`, with --http/--admin on free ports unless given; returns (proc, http, admin)."""
        h, a = free_port(), free_port()
        extra = []
        if "--http" not in args:
            extra += ["--http", f"127.0.0.1:{h}"]
        if "--admin" not in args:
            extra += ["--admin", f"127.0.0.1:{a}"]
        log = open(self.env.tmp / f"{log_name}-{h}.log", "wb")
        p = subprocess.Popen([str(self.env.binary), "serve", *args, *extra], cwd=self.env.cwd, stdout=log,
                             stderr=subprocess.STDOUT, env=self.env.vars)
        self.procs.append(p)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if p.poll() is not None:
                raise Failure(f"`ratekeeper serve {' '.join(args)}` exited {p.returncode} at start:\n"
                              + tail(log.name))
            try:
                if http("GET", f"http://127.0.0.1:{h}/readyz", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise Failure(f"`ratekeeper serve {' '.join(args)}` not ready in {READY_TIMEOUT} s:\n" + tail(log.name))
            time.sleep(0.05)
        return p, h, a

    def stop_serve(self, p, what):
        stop_at_once(p)
        try:
            rc = p.wait(timeout=20)  # requests in flight finish within 5 s
        except subprocess.TimeoutExpired:
            raise Failure(f"{what}: still running 20 s after SIGTERM")
        if rc != 0:
            raise Failure(f"{what}: exited {rc} on SIGTERM")

    def redis(self, conf_text=""):
        port = free_port()
        d = Path(tempfile.mkdtemp(dir=self.env.tmp, prefix="redis-"))
        conf = d / "redis.conf"
        conf.write_text(conf_text + f"\nport {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {d}\n"
                        "daemonize no\n")
        log = open(d / "log", "wb")
        p = subprocess.Popen(["redis-server", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if p.poll() is not None:
                raise Failure(f"redis-server exited {p.returncode} at start:\n" + tail(log.name))
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return port
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise Failure(f"redis-server not answering in {READY_TIMEOUT} s:\n" + tail(log.name))
            time.sleep(0.05)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                stop_at_once(p)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


class Failure(Exception):
    pass


def tail(path, n=20):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------------------------
# The environment every block runs in.

class Env:
    def __init__(self, args):
        self.src = Path(args.source).resolve()
        self.binary = Path(args.binary).resolve()
        self.build = Path(args.build).resolve()
        self.static_lib = Path(args.static_lib or self.build / "libratekeeper.a").resolve()
        self.shared_lib = Path(args.shared_lib or self.build / "libratekeeper.so").resolve()
        self.nginx_module = Path(args.nginx_module).resolve() if args.nginx_module else None
        self.tmp = Path(tempfile.mkdtemp(prefix="rk-docs-"))
        self.cwd = self.tmp / "repo"
        self.cwd.mkdir()
        for d in ("scripts", "tests", "bench", "include", "fuzz"):
            (self.cwd / d).symlink_to(self.src / d)
        for d in ("examples", "docs"):  # copies: a block may write into them (the dashboard's picture)
            shutil.copytree(self.src / d, self.cwd / d, symlinks=True)
        shutil.copy(self.src / "README.md", self.cwd / "README.md")
        (self.cwd / "build" / "dev").mkdir(parents=True)
        (self.cwd / "build" / "dev" / "ratekeeper").symlink_to(self.binary)
        (self.cwd / "build" / "dev" / "tests").symlink_to(self.build / "tests")
        bindir = self.tmp / "bin"
        bindir.mkdir()
        (bindir / "ratekeeper").symlink_to(self.binary)
        self.vars = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}", LC_ALL="C.UTF-8")
        self.vars.pop("LD_LIBRARY_PATH", None)

    def run(self, cmd, what, stdin=None, timeout=COMMAND_TIMEOUT):
        try:
            r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=self.cwd, env=self.vars, input=stdin,
                               capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failure(f"{what}: `{cmd}` still running after {timeout} s")
        out = r.stdout.decode(errors="replace").replace("\r\n", "\n")
        err = r.stderr.decode(errors="replace")
        if r.returncode != 0:
            raise Failure(f"{what}: `{cmd}` exited {r.returncode}\n--- stdout\n{out[-3000:]}--- stderr\n{err[-3000:]}")
        return out

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------------
# Shell blocks.

def split_transcript(text):
    """[(command, [expected lines])] from `$ ` lines, their `\\` continuations and the lines after them."""
    steps = []
    lines = text.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if not steps:
                raise Failure(f"transcript: output before the first `$ ` command: {lines[i]!r}")
            steps[-1][1].append(lines[i])
            i += 1
            continue
        cmd = [lines[i][2:]]
        while cmd[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd.append(lines[i])
        steps.append(("\n".join(cmd), []))
        i += 1
    return steps


def line_matches(pattern, actual):
    pattern, actual = pattern.rstrip(), actual.rstrip()
    if "..." not in pattern:
        return pattern == actual
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("...")), actual, re.S) is not None


def output_matches(expected, actual):
    """`...` alone on a line: any number of lines; `...` in a line: any text."""
    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            r = j == len(actual)
        elif expected[i].strip() == "...":
            r = go(i + 1, j) or (j < len(actual) and go(i, j + 1))
        else:
            r = j < len(actual) and line_matches(expected[i], actual[j]) and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r
    return go(0, 0)


DOC_PORTS = {"8080": "http", "9090": "admin", "6379": "redis"}


def with_ports(cmd, ports):
    return re.sub(r"\b(localhost|127\.0\.0\.1):(8080|9090|6379)\b",
                  lambda m: f"{m.group(1)}:{ports[m.group(2)]}" if m.group(2) in ports else m.group(0), cmd)


def ports_for(env, servers, text):
    ports = {}
    if re.search(r":(8080|9090)\b", text) and not re.search(r"^\$?\s*ratekeeper serve", text, re.M):
        _, h, a = servers.serve(["--config", "examples/rules.yaml"])
        ports.update({"8080": h, "9090": a})
    if re.search(r":6379\b", text):
        ports["6379"] = servers.redis()
    return ports


def run_serve_line(env, servers, line, what):
    """A documented `ratekeeper serve ...` line: started, ready, stopped cleanly."""
    words = shlex.split(line, comments=True)
    if words[:2] != ["ratekeeper", "serve"]:
        raise Failure(f"{what}: not a serve line: {line}")
    p, _, _ = servers.serve(words[2:])
    servers.stop_serve(p, f"{what}: `{line.strip()}`")


# What a block needs that only some builds have: (text in the block, path that must exist, why it may not).
NEEDS = [("build/dev/tests/ui-node", "build/dev/tests/ui-node/node_modules",
          "playwright-core, which the integration.ui_npm_ci fixture installs where chromium, node and npm are found"),
         ("/usr/bin/chromium", "/usr/bin/chromium", "chromium (scripts/deps installs it)")]


def run_sh(env, block):
    for text, path, why in NEEDS:
        if text in block.text and not (env.cwd / path).exists():
            return f"not run: it needs {why}"
    servers = Servers(env)
    try:
        ports = ports_for(env, servers, block.text)
        if any(l.startswith("$ ") for l in block.text.split("\n")):
            own = None  # the server the transcript started itself, stopped (and checked) at its end
            for cmd, expected in split_transcript(block.text):
                started = re.fullmatch(r"ratekeeper serve\b(.*)&\s*", cmd, re.S)
                if started and not own:
                    # Its own ports are free ones; a Redis it names (:6379) is the block's.
                    own, h, a = servers.serve(shlex.split(with_ports(started.group(1), ports).replace("\\\n", " ")))
                    ports.update({"8080": h, "9090": a})
                    continue
                cmd = with_ports(cmd, ports)
                out = env.run(cmd, block.where())
                if expected and not output_matches(expected, out.rstrip("\n").split("\n")):
                    raise Failure(f"{block.where()}: `{cmd}` printed\n{out}--- where the doc shows\n"
                                  + "\n".join(expected))
            if own:
                servers.stop_serve(own, f"{block.where()}: the transcript's `ratekeeper serve`")
            return
        script = []
        for line in with_ports(block.text, ports).split("\n"):
            if re.match(r"^\s*ratekeeper serve\b", line):
                run_serve_line(env, servers, line, block.where())
            else:
                script.append(line)
        env.run("set -e\n" + "\n".join(script), block.where())
    finally:
        servers.stop()


# ---------------------------------------------------------------------------------------------------------------
# YAML blocks: rules files, settings files, scenarios.

RULES_KEYS = {"domain", "descriptors", "defaults", "shadow_mode", "all_or_nothing", "forward_auth", "store",
              "redis_failure", "sharing"}
SCENARIO_KEYS = {"clients", "duration", "limiter"}


def top_keys(text):
    return {m.group(1) for m in re.finditer(r"^([A-Za-z_][\w-]*)\s*:", text, re.M)}


def check_rules(env, text, what, name="rules.yaml"):
    d = Path(tempfile.mkdtemp(dir=env.tmp, prefix="rules-"))
    f = d / name
    f.write_text(text)
    env.run(f"ratekeeper check-config {f}", what)


def check_settings(env, path, what, servers=None):
    own = servers is None
    servers = servers or Servers(env)
    try:
        p, _, _ = servers.serve(["--settings", str(path), "--config", "examples/rules.yaml"])
        servers.stop_serve(p, f"{what}: serve --settings")
    finally:
        if own:
            servers.stop()


def run_yaml(env, block):
    keys = top_keys(block.text)
    if keys & SCENARIO_KEYS and "clients" in keys:
        f = env.tmp / f"scenario-{block.line}.yaml"
        f.write_text(block.text)
        env.run(f"ratekeeper simulate {f} > /dev/null", block.where())
    elif keys and keys <= RULES_KEYS:
        text = block.text if "domain" in keys else "domain: docs_test\n" + block.text
        check_rules(env, text, block.where())
    elif keys and all("-" in k or k in SETTINGS_WORDS for k in keys):
        f = env.tmp / f"settings-{block.line}.yaml"
        text = block.text
        servers = Servers(env)
        try:
            if "redis" in keys:  # the documented Redis is elsewhere: a real one on loopback, the URL's form kept
                port = servers.redis()
                text = re.sub(r"(redis://(?:[^@\s]*@)?)[\w.-]+:\d+", rf"\g<1>127.0.0.1:{port}", text)
            f.write_text(text)
            check_settings(env, f, block.where(), servers)
        finally:
            servers.stop()
    else:
        raise Failure(f"{block.where()}: a yaml block that is neither a rules file, a settings file nor a scenario "
                      f"(top-level keys: {sorted(keys)})")


SETTINGS_WORDS = {"http", "admin", "grpc", "threads", "redis", "proxy", "config", "settings"}


# ---------------------------------------------------------------------------------------------------------------
# JSON blocks.

def parse_json_doc(text):
    text = re.sub(r"\[\s*\.\.\.\s*\]", "[]", text)
    text = re.sub(r",\s*\.\.\.\s*(?=[\]}])", "", text)
    return json.loads(text)


def same_shape(doc, real, path="$"):
    if isinstance(doc, dict):
        if not isinstance(real, dict):
            return f"{path}: the doc shows an object, the answer has {json.dumps(real)[:80]}"
        missing = [k for k in doc if k not in real]
        extra = [k for k in real if k not in doc]
        if missing or extra:
            return f"{path}: keys the answer lacks {missing}, keys the doc lacks {extra}"
        for k in doc:
            e = same_shape(doc[k], real[k], f"{path}.{k}")
            if e:
                return e
    elif isinstance(doc, list):
        if not isinstance(real, list):
            return f"{path}: the doc shows a list, the answer has {json.dumps(real)[:80]}"
        if doc and real:
            return same_shape(doc[0], real[0], f"{path}[0]")
    elif doc is not None and real is not None:
        kinds = (bool, (int, float), str)
        for k in kinds:
            if isinstance(doc, k) != isinstance(real, k):
                return f"{path}: the doc shows {json.dumps(doc)}, the answer has {json.dumps(real)}"
    return None


def compare_answer(shown_block, body, what):
    try:
        shown = parse_json_doc(shown_block.text)
    except json.JSONDecodeError as e:
        raise Failure(f"{shown_block.where()}: not JSON: {e}")
    err = same_shape(shown, json.loads(body))
    if err:
        raise Failure(f"{shown_block.where()}: the answer to {what} differs from the doc: {err}\n"
                      f"answer: {body[:1500].decode(errors='replace')}")


def run_json(env, block):
    """`json POST /PATH`: a request, sent; `json GET /PATH`: an answer, compared with a real one."""
    try:
        doc = parse_json_doc(block.text)
    except json.JSONDecodeError as e:
        raise Failure(f"{block.where()}: not JSON: {e}")
    if not block.info:
        return
    method, path = (block.info + [""])[:2]
    if method not in ("POST", "GET") or not path.startswith("/"):
        raise Failure(f"{block.where()}: a json block's fence says `json POST /PATH` or `json GET /PATH`")
    servers = Servers(env)
    try:
        _, h, a = servers.serve(["--config", "examples/rules.yaml"])
        port = a if path.startswith("/v1/admin/") else h
        if method == "GET":
            for _ in range(20):  # README's loop: a client over its limit, for the answer to show
                http("GET", f"http://127.0.0.1:{h}/v1/auth/edge")
            status, body = http("GET", f"http://127.0.0.1:{port}{path}")
            if status != 200:
                raise Failure(f"{block.where()}: GET {path} answered {status}: {body[:500]!r}")
            compare_answer(block, body, f"GET {path}")
            return
        status, body = http("POST", f"http://127.0.0.1:{port}{path}", json.dumps(doc).encode())
        if status not in (200, 429):
            raise Failure(f"{block.where()}: POST {path} answered {status}: {body[:500]!r}")
        if block.answer:
            compare_answer(block.answer, body, f"POST {path}")
    finally:
        servers.stop()


# ---------------------------------------------------------------------------------------------------------------
# C and C++ blocks.

C_PRELUDE = """#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
"""
C_GIVEN = """#include <ratekeeper/ratekeeper.h>
/* what the reader's program supplies */
static const char* key = "203.0.113.7";
static size_t key_len = 11;
static void reply(int status, const rk_header_field* fields, size_t n) { (void)status; (void)fields; (void)n; }
"""
CPP_PRELUDE = """#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
"""
CPP_GIVEN = """#include <ratekeeper/limiter.h>
// what the reader's program supplies
[[maybe_unused]] static const char* key = "203.0.113.7";
[[maybe_unused]] static rk::LimitSpec spec{.algorithm = rk::Algorithm::kGcra, .limit = 10, .burst = 5};
template <class... A> void reply_429(A&&...) {}
"""


def run_c(env, block):
    cpp = block.lang in ("cpp", "c++", "cc")
    lines = block.text.split("\n")
    includes = [l for l in lines if l.startswith("#include")]
    body = [l for l in lines if not l.startswith("#include")]
    prelude, given = (CPP_PRELUDE, CPP_GIVEN) if cpp else (C_PRELUDE, C_GIVEN)
    if re.search(r"\bint\s+main\s*\(", block.text):
        program = prelude + block.text
    else:
        program = (prelude + "\n".join(includes) + "\n" + given + "int main(void) {\n  {\n"
                   + "\n".join(body) + "\n  }\n  return 0;\n}\n")
    d = Path(tempfile.mkdtemp(dir=env.tmp, prefix="c-"))
    srcf = d / ("snippet.cc" if cpp else "snippet.c")
    srcf.write_text(program)
    inc = env.src / "include"
    if cpp:
        cmd = f"c++ -std=c++20 -I{inc} {srcf} -o {d}/a.out {env.static_lib} -pthread"
    else:
        cmd = f"cc -std=c99 -Wall -I{inc} {srcf} -o {d}/a.out {env.shared_lib} -Wl,-rpath,{env.shared_lib.parent}"
    try:
        env.run(cmd, block.where())
    except Failure as e:
        raise Failure(f"{e}\n--- the program compiled (the block wrapped as documented in {__file__})\n{program}")


# ---------------------------------------------------------------------------------------------------------------
# redis.conf and nginx blocks.

def run_redis(env, block):
    servers = Servers(env)
    try:
        servers.redis(block.text)
    finally:
        servers.stop()


def run_nginx(env, block):
    if not env.nginx_module:
        return "not run: the nginx module was not built"
    d = Path(tempfile.mkdtemp(dir=env.tmp, prefix="nginx-"))
    # The module as built, wherever the block says it is installed (modules/, /usr/lib/nginx/modules/, ...).
    text = re.sub(r"(load_module\s+)\S*ngx_http_ratekeeper_module\.so;", lambda m: f"{m.group(1)}{env.nginx_module};",
                  block.text)
    head = f"pid {d}/nginx.pid;\nerror_log {d}/error.log;\n"
    if not re.search(r"^\s*events\b", text, re.M):
        head += "events {}\n"
    loads = "".join(l + "\n" for l in text.split("\n") if l.startswith("load_module "))  # must come first
    rest = "\n".join(l for l in text.split("\n") if not l.startswith("load_module "))
    (d / "nginx.conf").write_text(loads + head + rest)
    env.run(f"nginx -t -q -p {d} -c {d}/nginx.conf -e {d}/error.log", block.where())


def is_synopsis(block):
    heads = [l for l in block.text.split("\n") if l.strip() and not l[0].isspace()]
    return block.lang == "" and heads and all(re.match(r"ratekeeper [a-z-]+( |$)", l) for l in heads)


def run_synopsis(env, block):
    """A command's synopsis names exactly the flags its --help names."""
    groups = {}
    for line in block.text.split("\n"):
        if line.startswith("ratekeeper "):
            cmd = line.split()[1]
        if line.strip():
            groups.setdefault(cmd, set()).update(re.findall(r"(?<![\w-])--[a-z][\w-]*", line))
    for cmd, shown in groups.items():
        helped = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", env.run(f"ratekeeper {cmd} --help 2>&1", block.where())))
        helped.discard("--help")
        if shown != helped:
            raise Failure(f"{block.where()}: `ratekeeper {cmd}`: flags the synopsis lacks {sorted(helped - shown)}, "
                          f"flags --help does not know {sorted(shown - helped)}")


RUNNERS = {"sh": run_sh, "console": run_sh, "shell": run_sh, "bash": run_sh, "yaml": run_yaml, "yml": run_yaml,
           "json": run_json, "c": run_c, "cpp": run_c, "c++": run_c, "redis": run_redis, "nginx": run_nginx}


def check_by(env, block):
    path = env.src / block.marker[1]
    if not path.is_file():
        raise Failure(f"{block.where()}: `by {block.marker[1]}`: no such file")
    if Path(block.doc).name not in path.read_text(errors="replace"):
        raise Failure(f"{block.where()}: `by {block.marker[1]}`: it does not mention {Path(block.doc).name}")


# ---------------------------------------------------------------------------------------------------------------
# examples/

def mentioned_by_a_test(env, rel):
    """Some test outside tests/docs names the example: its path, or its directory's and its own names."""
    name, parent = Path(rel).name, Path(rel).parent.name
    for p in sorted((env.src / "tests").rglob("*")):
        if p.is_file() and "docs" not in p.relative_to(env.src / "tests").parts[:1] and p.stat().st_size < 2_000_000:
            text = p.read_text(errors="replace")
            if rel in text or str(Path(rel).parent) + "/" in text or (f'"{name}"' in text and f'"{parent}"' in text):
                return str(p.relative_to(env.src))
    return None


def run_systemd_unit(env, rel):
    """The unit's install lines (comments `#   CMD`), run into a temporary root; then its commands from there."""
    unit = (env.src / rel).read_text()
    root = env.tmp / "root"
    (root / "etc" / "systemd" / "system").mkdir(parents=True, exist_ok=True)  # as on any systemd host
    installed = []
    for m in re.finditer(r"^#\s{3,}(.+)$", unit, re.M):
        cmd = m.group(1)
        if cmd.startswith("systemctl"):
            installed.append(f"not run: {cmd}")
            continue
        env.run(re.sub(r"(?<![\w.])/etc/", f"{root}/etc/", cmd), rel)
    if not installed:
        raise Failure(f"{rel}: no `systemctl ...` install line found (the install lines are comments `#   CMD`)")
    for name in re.findall(r"^StateDirectory=(.+)$", unit, re.M):  # systemd makes /var/lib/NAME before the start
        for d in name.split():
            (root / "var" / "lib" / d).mkdir(parents=True, exist_ok=True)
    for key in ("ExecStartPre", "ExecStart"):
        m = re.search(rf"^{key}=((?:.*\\\n)*.+)$", unit, re.M)  # with its `\` continuation lines, as systemd reads it
        if not m:
            raise Failure(f"{rel}: no {key}")
        cmd = re.sub(r"\\\n\s*", " ", m.group(1)).replace("/usr/bin/ratekeeper", "ratekeeper")
        cmd = cmd.replace("/etc/", f"{root}/etc/").replace("/var/lib/", f"{root}/var/lib/")
        if " serve " in cmd:
            servers = Servers(env)
            try:
                p, _, _ = servers.serve(shlex.split(cmd)[2:], "systemd")
                servers.stop_serve(p, f"{rel}: {key}")
            finally:
                servers.stop()
        else:
            env.run(cmd, f"{rel}: {key}")
    # Documentation= names files of the .deb: tests/package/install_test.sh checks that it has them.
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(env.src / rel)], capture_output=True,
                           text=True, timeout=COMMAND_TIMEOUT)
        bad = [l for l in (r.stdout + r.stderr).splitlines()
               if rel.split("/")[-1] in l and "not executable" not in l and "No such file" not in l]
        if bad:
            raise Failure(f"{rel}: systemd-analyze verify:\n" + "\n".join(bad))
    return "install lines, ExecStartPre and ExecStart run in a temporary root; " + "; ".join(installed)


def run_example(env, rel):
    p = env.src / rel
    if rel == "examples/systemd/ratekeeper.service":
        return run_systemd_unit(env, rel)
    if rel == "examples/systemd/settings.yaml":
        return check_settings(env, p, rel)
    if p.suffix in (".yaml", ".yml"):
        keys = top_keys(p.read_text())
        if "clients" in keys:
            env.run(f"ratekeeper simulate {rel} > /dev/null", rel)
            return None
        if "domain" in keys:
            env.run(f"ratekeeper check-config {rel}", rel)
            return None
    if p.suffix == ".trace":
        users = [d for d in ["README.md", *sorted(str(x.relative_to(env.src)) for x in (env.src / "docs").glob("*.md"))]
                 if rel in (env.src / d).read_text()]
        if not users:
            raise Failure(f"{rel}: no doc uses this trace")
        return f"data, run by the blocks of {', '.join(users)}"
    by = mentioned_by_a_test(env, rel)
    if not by:
        raise Failure(f"{rel}: no runner here, and no test under tests/ names it")
    return f"by {by}"


# ---------------------------------------------------------------------------------------------------------------

def collect(src):
    docs = ["README.md"] + sorted(str(p.relative_to(src)) for p in (src / "docs").glob("*.md"))
    blocks, errors = [], []
    for d in docs:
        b, e = parse_markdown(src, d)
        blocks += b
        errors += e
    examples = sorted(str(p.relative_to(src)) for p in (src / "examples").rglob("*") if p.is_file())
    return blocks, examples, errors


class Report:
    """What happened to each block and example, printed as it goes; failures gathered for the end."""

    def __init__(self, failures):
        self.failures = failures
        self.counts = {"run": 0, "not run here": 0, "run by other tests": 0, "skipped": 0, "answers compared": 0}

    def attempt(self, name, lang, fn, count=True):
        t0 = time.monotonic()
        try:
            note = fn()
        except Failure as e:
            print(f"{name}: {lang}FAILED", flush=True)
            self.failures.append(str(e))
            return
        if count:
            self.counts["not run here" if note and note.startswith("not run:") else "run"] += 1
        print(f"{name}: {lang}ok ({time.monotonic() - t0:.1f} s){' ' + note if note else ''}", flush=True)


def run_block(env, report, b, list_only):
    if b.is_answer:
        report.counts["answers compared"] += 1
        return
    lang = f"{b.lang or '(none)'}: "
    if b.marker:
        kind, arg = b.marker
        if list_only or kind == "skip":
            print(f"{b.where()}: {lang}{kind} {arg}")
            report.counts["skipped"] += kind == "skip"
        else:
            report.counts["run by other tests"] += 1
            report.attempt(b.where(), lang, lambda: check_by(env, b) or f"by {arg}", count=False)
        return
    runner = run_synopsis if is_synopsis(b) else RUNNERS.get(b.lang)
    if not runner:
        report.failures.append(f"{b.where()}: a ```{b.lang} block with no runner: give it a language the docs test "
                               "runs, or mark it <!-- docs-test: skip REASON --> / <!-- docs-test: by PATH -->")
    elif list_only:
        print(f"{b.where()}: {lang}run")
    else:
        report.attempt(b.where(), lang, lambda: runner(env, b))


SELF_CHECK = "tests/docs/testdata/broken.md"


def self_check(env):
    """Every block of SELF_CHECK must fail, with the text its `<!-- expect: TEXT -->` comment gives."""
    blocks, parse_errors = parse_markdown(env.src, SELF_CHECK)
    lines = (env.src / SELF_CHECK).read_text().split("\n")
    problems = []
    for b in blocks:
        if b.is_answer:
            continue
        comment = lines[b.line - (3 if b.marker or lines[b.line - 2].startswith("<!-- docs-test") else 2)]
        m = re.match(r"<!-- expect: (.*) -->$", comment)
        if not m:
            problems.append(f"{b.where()}: no <!-- expect: TEXT --> before the block")
            continue
        report = Report([e for e in parse_errors if e.startswith(f"{SELF_CHECK}:{b.line - 1}:")])
        with contextlib.redirect_stdout(io.StringIO()):
            run_block(env, report, b, False)
        said = "\n".join(report.failures)
        if m.group(1) not in said:
            problems.append(f"{b.where()}: a broken block the docs test should refuse with {m.group(1)!r}; it said: "
                            + (said[:800] or "nothing (it passed)"))
    print(f"{SELF_CHECK}: {sum(not b.is_answer for b in blocks)} broken blocks, "
          + ("each refused" if not problems else "NOT ALL REFUSED"))
    return problems


def check_changelog(src):
    """The version's one home is project() in CMakeLists.txt; CHANGELOG.md's newest version section names it."""
    m = re.search(r"^project\(ratekeeper VERSION (\S+)", (src / "CMakeLists.txt").read_text(), re.M)
    if not m:
        return ["CMakeLists.txt: no `project(ratekeeper VERSION X.Y.Z`"]
    versions = re.findall(r"^## \[(\d[^\]]*)\]", (src / "CHANGELOG.md").read_text(), re.M)
    if not versions or versions[0] != m.group(1):
        return [f"CHANGELOG.md: the newest version section is {versions[0] if versions else 'missing'}, "
                f"where CMakeLists.txt's project() says {m.group(1)}"]
    print(f"CHANGELOG.md: newest version {m.group(1)}, as project() says")
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--static-lib", help="libratekeeper.a (default: BUILD_DIR/libratekeeper.a)")
    ap.add_argument("--shared-lib", help="libratekeeper.so (default: BUILD_DIR/libratekeeper.so)")
    ap.add_argument("--nginx-module")
    ap.add_argument("--only", help="FILE or FILE:LINE: run only these blocks (or this example)")
    ap.add_argument("--list", action="store_true", help="list the blocks and what would be done with each")
    args = ap.parse_args()
    env = Env(args)
    blocks, examples, failures = collect(env.src)
    report = Report(failures)
    started = time.monotonic()
    try:
        if not args.only and not args.list:
            failures += self_check(env)
            failures += check_changelog(env.src)
        for b in blocks:
            if not args.only or args.only in (b.doc, b.where()):
                run_block(env, report, b, args.list)
        for rel in examples:
            if args.only and args.only != rel:
                continue
            if args.list:
                print(f"{rel}: example")
            else:
                report.attempt(rel, "", lambda: run_example(env, rel))
    finally:
        env.cleanup()
    print("\n" + ", ".join(f"{n} {what}" for what, n in report.counts.items())
          + f"; {time.monotonic() - started:.0f} s")
    if failures:
        print(f"\n{len(failures)} FAILED:\n\n" + "\n\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
