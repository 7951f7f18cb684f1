#!/usr/bin/python3
"""gRPC benchmark: ratekeeper's Envoy rate-limit API under bench/grpc_load.cc (async, many calls in flight), and in
the same run its own HTTP JSON path (POST /v1/check under wrk) on the same rules and the same 1,000 clients.
Prints decisions/s and p99 for each and the ratio.

  bench/grpc_bench.py build/release/ratekeeper build/release/bench/rk_grpc_load [--seconds 5] [--threads 2]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from benchlib import free_port

RULES = """
domain: bench
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: gcra, burst: 1000}
"""

LUA = """
local n = 0
request = function()
  n = n + 1
  local body = '{"domain":"bench","descriptors":[{"entries":[{"key":"client","value":"client-' .. (n % 1000) .. '"}]}]}'
  return wrk.format("POST", "/v1/check", {["Content-Type"] = "application/json"}, body)
end
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("load")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=64)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rk-grpcbench-")
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    http, admin, grpc_port = free_port(), free_port(), free_port()
    proc = subprocess.Popen([args.binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % http,
                             "--admin", "127.0.0.1:%d" % admin, "--grpc", "127.0.0.1:%d" % grpc_port,
                             "--threads", str(args.threads), "--log-level", "error"])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/readyz" % http, timeout=1).read()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        subprocess.run([args.load, "127.0.0.1:%d" % grpc_port, "--seconds", "1"], check=True, capture_output=True)
        out = subprocess.run([args.load, "127.0.0.1:%d" % grpc_port, "--seconds", str(args.seconds),
                              "--inflight", str(args.inflight)], check=True, capture_output=True, text=True).stdout
        g_rate = float(re.search(r"decisions/s (\S+)", out).group(1))
        g_p99 = float(re.search(r"p99_ms (\S+)", out).group(1))
        script = os.path.join(work, "check.lua")
        with open(script, "w") as f:
            f.write(LUA)
        wout = subprocess.run(["wrk", "-t1", "-c%d" % args.inflight, "-d%ds" % args.seconds, "--latency", "-s", script,
                               "http://127.0.0.1:%d" % http], check=True, capture_output=True, text=True).stdout
        h_rate = float(re.search(r"Requests/sec:\s+([\d.]+)", wout).group(1))
        m = re.search(r"99%\s+([\d.]+)(us|ms|s)", wout)
        h_p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
        print("%d calls in flight, 1,000 clients; server with %d HTTP thread(s) and gRPC's own pool, on %d cores"
              % (args.inflight, args.threads, os.cpu_count()))
        print("%-28s %14s %10s" % ("", "decisions/s", "p99 ms"))
        print("%-28s %14.0f %10.3f   (target >= 50,000/s)" % ("gRPC ShouldRateLimit", g_rate, g_p99))
        print("%-28s %14.0f %10.3f" % ("HTTP POST /v1/check (JSON)", h_rate, h_p99))
        print("gRPC / HTTP: %.2fx" % (g_rate / h_rate))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
