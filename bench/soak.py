#!/usr/bin/python3
"""Soak: `ratekeeper serve` at a steady fraction of its saturating load for a long time, RSS and latency sampled
each minute. Not a CI test: a bench command (bench/run soak), 30 minutes by default.

The load is wrk over loopback keep-alive against forward-auth, paced by wrk's delay() so that it is a fixed rate,
with keys drawn from far more distinct clients than the store may hold (--keys 2,000,000 against --max-keys
200,000), so that the store fills, evicts, and sweeps for the whole run: memory must stop growing at the bound.

  bench/soak.py build/release/ratekeeper [--minutes 30] [--fraction 0.5] [--keys 2000000] [--max-keys 200000]

Prints one line a minute (requests/s, p50/p99/max latency, non-2xx, RSS, keys tracked) and a verdict: RSS over
the second half of the run within 10% of its median, p99 without a trend (last third vs first third within 2x).
"""
import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import urllib.request

from benchlib import free_port, run_wrk as wrk, wait_http

RULES = """
domain: soak
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: earrrl, half_life: 10s}
  - key: route
    descriptors:
      - key: client
        rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra, burst: 20}
forward_auth:
  descriptors:
    - entries: [{key: client, from: header, header: X-Client}]
    - entries: [{key: route, from: path}, {key: client, from: header, header: X-Client}]
"""

# Each connection sends its next request `delay` ms after the previous answer: a paced, not a saturating, load.
LUA = """
local keys = %(keys)d
local n = math.random(0, keys - 1)
request = function()
  n = (n + 7919) %% keys  -- a prime step: every client in turn, exactly (Lua's doubles are exact here)
  return wrk.format("GET", nil, {["X-Client"] = "c" .. (n %% keys)})
end
delay = function() return %(delay_ms)d end
"""

SATURATE_LUA = LUA.replace("delay = function() return %(delay_ms)d end\n", "")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metric(admin, name):
    text = urllib.request.urlopen(admin + "/metrics", timeout=5).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + "{") or
               l.startswith(name + " "))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--max-keys", type=int, default=200_000)
    ap.add_argument("--connections", type=int, default=32, help="for the calibration; then as many as the rate needs")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="rk-soak-")
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    port, admin_port = free_port(), free_port()
    server = subprocess.Popen([args.binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % port,
                               "--admin", "127.0.0.1:%d" % admin_port, "--max-keys", str(args.max_keys),
                               "--log-level", "error"], stderr=open(os.path.join(work, "log"), "w"))
    try:
        url = "http://127.0.0.1:%d/v1/auth/soak" % port
        admin = "http://127.0.0.1:%d" % admin_port
        wait_http(admin + "/readyz")
        sat_script = os.path.join(work, "saturate.lua")
        with open(sat_script, "w") as f:
            f.write(SATURATE_LUA % {"keys": args.keys})
        wrk(url, 2, 64, sat_script)  # warm up
        saturating = wrk(url, 5, 64, sat_script)["rps"]
        target = saturating * args.fraction
        # wrk's delay() is in whole milliseconds and adds to each answer's latency: pace at 1 ms and find, by a short
        # measurement, how many connections give the target rate.
        delay_ms = 1
        script = os.path.join(work, "paced.lua")
        with open(script, "w") as f:
            f.write(LUA % {"keys": args.keys, "delay_ms": delay_ms})
        per_connection = wrk(url, 3, args.connections, script)["rps"] / args.connections
        args.connections = max(1, min(1000, round(target / per_connection)))
        print("saturating load %.0f requests/s; soaking at %.0f%% of it: %d connections, %d ms between a "
              "connection's answer and its next request, %d distinct clients, --max-keys %d, %d minutes"
              % (saturating, 100 * args.fraction, args.connections, delay_ms, args.keys, args.max_keys, args.minutes))
        print("%6s %10s %8s %8s %8s %8s %8s %10s %10s" % ("minute", "req/s", "p50 ms", "p99 ms", "max ms", "non2xx",
                                                         "sockerr", "RSS MiB", "keys"))
        rows = []
        for minute in range(1, args.minutes + 1):
            r = wrk(url, 60, args.connections, script)
            r["rss"] = rss_mib(server.pid)
            r["keys"] = metric(admin, "ratekeeper_store_keys")
            rows.append(r)
            print("%6d %10.0f %8.2f %8.2f %8.1f %8d %8d %10.1f %10.0f" % (
                minute, r["rps"], r["p50"], r["p99"], r["max"], r["non2xx"], r["socket_errors"], r["rss"],
                r["keys"]), flush=True)
            if server.poll() is not None:
                raise SystemExit("ratekeeper exited during the soak: %d" % server.returncode)
        half = [r["rss"] for r in rows[len(rows) // 2:]]
        med = statistics.median(half)
        rss_flat = all(abs(x - med) <= 0.10 * med for x in half)
        third = max(1, len(rows) // 3)
        p99_first = statistics.median(r["p99"] for r in rows[:third])
        p99_last = statistics.median(r["p99"] for r in rows[-third:])
        p99_flat = p99_last <= 2 * p99_first
        print("RSS over the second half: %.1f-%.1f MiB (median %.1f): %s" % (min(half), max(half), med,
                                                                          "flat" if rss_flat else "NOT flat"))
        print("p99, first third vs last third (medians): %.2f vs %.2f ms: %s" % (p99_first, p99_last,
                                                                               "flat" if p99_flat else "NOT flat"))
        print("requests answered: %d, socket errors: %d" % (sum(r["rps"] * 60 for r in rows),
                                                          sum(r["socket_errors"] for r in rows)))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=15)


if __name__ == "__main__":
    main()
