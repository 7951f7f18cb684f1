"""A flood of distinct long keys against a real `ratekeeper serve`: its RSS against --max-memory.

Each request is a /v1/check of one descriptor whose value is a distinct 1,000-byte API key (the most a value may
be is 1,024 bytes), pipelined 100 at a time over a few keep-alive connections. Prints the server's RSS before,
during and after, the rule's tracked keys, and the load average beside them (docs/security.md, "Memory").
  python3 bench/long_keys.py build/dev/ratekeeper --max-memory 16MiB --keys 300000
  python3 bench/long_keys.py build/dev/ratekeeper --keys 300000          # no budget: max_keys alone
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

from benchlib import free_port, wait_http

RULES = """domain: api
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 100}
"""


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def flood(port, first, count, batch, errors):
    """Sends `count` checks of distinct keys (numbered from `first`), `batch` in flight on one connection."""
    s = socket.create_connection(("127.0.0.1", port))
    pad = "k" * 990
    sent = 0
    while sent < count:
        n = min(batch, count - sent)
        out = []
        for i in range(first + sent, first + sent + n):
            body = '{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"%s%010d"}]}]}' % (pad, i)
            out.append("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\n\r\n%s" % (len(body), body))
        s.sendall("".join(out).encode())
        buf, seen = b"", 0
        while seen < n:
            chunk = s.recv(1 << 16)
            if not chunk:
                errors.append("connection closed")
                return
            buf += chunk
            seen = buf.count(b"HTTP/1.1 ")
        errors.extend(line for line in buf.split(b"\r\n") if line.startswith(b"HTTP/1.1 ") and b" 200 " not in line)
        sent += n
    s.close()


def tracked_keys(admin_port):
    rules = json.load(urllib.request.urlopen("http://127.0.0.1:%d/v1/rules" % admin_port, timeout=5))
    return sum(r.get("keys", 0) for d in rules.get("domains", []) for r in d.get("rules", [])) if "domains" in rules \
        else sum(r.get("keys", 0) for r in rules.get("rules", []))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--max-memory", default="", help="passed to serve (e.g. 16MiB); empty: none")
    ap.add_argument("--keys", type=int, default=300_000)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="rk-longkeys-")
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    port, admin = free_port(), free_port()
    cmd = [args.binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % port, "--admin",
           "127.0.0.1:%d" % admin, "--threads", "2", "--log-level", "error"]
    if args.max_memory:
        cmd += ["--max-memory", args.max_memory]
    server = subprocess.Popen(cmd)
    try:
        wait_http("http://127.0.0.1:%d/readyz" % port)
        before = rss_mib(server.pid)
        peak = [before]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_mib(server.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        errors = []
        per = args.keys // args.connections
        start = time.monotonic()
        threads = [threading.Thread(target=flood, args=(port, c * per, per, args.batch, errors))
                   for c in range(args.connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.monotonic() - start
        done.set()
        sampler.join()
        after = rss_mib(server.pid)
        keys = tracked_keys(admin)
        print("ratekeeper serve --max-memory %s: %d distinct 1,000-byte keys in %.1f s (%.0f/s), %d connections x %d "
              "pipelined; non-200 answers %d" % (args.max_memory or "(none)", per * args.connections, seconds,
                                                 per * args.connections / seconds, args.connections, args.batch,
                                                 len(errors)))
        print("RSS MiB: before %.1f, peak %.1f, after %.1f; keys tracked by the rule %s; load average %s, %d cores"
              % (before, peak[0], after, keys, " ".join("%.2f" % x for x in os.getloadavg()), os.cpu_count()))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
