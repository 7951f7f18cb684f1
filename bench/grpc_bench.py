#!/usr/bin/python3
"""gRPC benchmark: ratekeeper's Envoy rate-limit API, and in the same run its own HTTP JSON path (POST /v1/check
under wrk), on the same rules and the same 1,000 clients, against one `ratekeeper serve --grpc`.

Two gRPC clients, both many calls in flight, each printed on its own line:
  - rk_grpc_h2_load (bench/grpc_h2_load.cc): gRPC over a plain HTTP/2 codec (libnghttp2), as Envoy's own gRPC
    client makes the calls. The figure of record: its cost per call is about Envoy's.
  - rk_grpc_load (bench/grpc_load.cc), with --grpc-load: libgrpc's C++ client. It costs about as much CPU per call
    as the server, so on 2 shared cores it measures the pair, not the server.
Passes alternate the clients (h2, libgrpc, HTTP, h2, ...) so a noisy neighbour hurts all alike; the summary takes
each row's median. CPU per call (server's, from /proc; client's, from rusage) is printed for every row.

  bench/grpc_bench.py build/release/ratekeeper build/release/bench/rk_grpc_h2_load \
      [--grpc-load build/release/bench/rk_grpc_load] [--seconds 5] [--passes 3] [--threads 2] [--inflight 64]
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile

from benchlib import free_port, halt_polling, parse_grpc_load, run_wrk, wait_http

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

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measured(server_pid, run):
    """Runs one client; returns its figures with the server's and the client's CPU microseconds per decision."""
    s0, c0 = cpu_seconds(server_pid), children_cpu()
    row = run()
    s1, c1 = cpu_seconds(server_pid), children_cpu()
    calls = max(row["calls"], 1)
    row["server_us"] = (s1 - s0) * 1e6 / calls
    row["client_us"] = (c1 - c0) * 1e6 / calls
    return row


def grpc_client(load, port, seconds, inflight):
    def run():
        out = subprocess.run([load, "127.0.0.1:%d" % port, "--seconds", str(seconds), "--inflight", str(inflight)],
                             check=True, capture_output=True, text=True).stdout
        r = parse_grpc_load(out)
        return {"rps": r["rate"], "p99": r["p99_ms"], "calls": r["rate"] * seconds, "failed": r["failed"]}
    return run


def http_client(port, seconds, inflight, script):
    def run():
        r = run_wrk("http://127.0.0.1:%d" % port, seconds, inflight, script)
        return {"rps": r["rps"], "p99": r["p99"], "calls": r["requests"], "failed": r["non2xx"] + r["socket_errors"]}
    return run


def load_average():
    return open("/proc/loadavg").read().split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("h2_load")
    ap.add_argument("--grpc-load", help="also run libgrpc's client (bench/grpc_load.cc)")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=64)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rk-grpcbench-")
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    script = os.path.join(work, "check.lua")
    with open(script, "w") as f:
        f.write(LUA)
    http, admin, grpc_port = free_port(), free_port(), free_port()
    proc = subprocess.Popen([args.binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % http,
                             "--admin", "127.0.0.1:%d" % admin, "--grpc", "127.0.0.1:%d" % grpc_port,
                             "--threads", str(args.threads), "--log-level", "error"])
    try:
        wait_http("http://127.0.0.1:%d/readyz" % http, 20)
        rows = [("gRPC, nghttp2 client (Envoy-like)", grpc_client(args.h2_load, grpc_port, args.seconds, args.inflight))]
        if args.grpc_load:
            rows.append(("gRPC, libgrpc++ client", grpc_client(args.grpc_load, grpc_port, args.seconds, args.inflight)))
        rows.append(("HTTP POST /v1/check (wrk)", http_client(http, args.seconds, args.inflight, script)))
        # Warm-up: the server's threads, allocator and the 1,000 keys.
        subprocess.run([args.h2_load, "127.0.0.1:%d" % grpc_port, "--seconds", "1"], check=True, capture_output=True)
        print("%d calls in flight, 1,000 clients; server with %d HTTP thread(s) and its gRPC completion-queue threads, "
              "on %d cores; %d passes of %d s, load average %s at the start; %s"
              % (args.inflight, args.threads, os.cpu_count(), args.passes, args.seconds, load_average(),
                 halt_polling()))
        header = "%-36s %12s %9s %10s %10s %7s" % ("", "decisions/s", "p99 ms", "server us", "client us", "failed")
        results = {name: [] for name, _ in rows}
        for p in range(args.passes):
            print("pass %d" % (p + 1))
            print(header)
            for name, run in rows:
                r = measured(proc.pid, run)
                results[name].append(r)
                print("%-36s %12.0f %9.3f %10.1f %10.1f %7d"
                      % (name, r["rps"], r["p99"], r["server_us"], r["client_us"], r["failed"]))
        print("median of %d passes (load average %s at the end)" % (args.passes, load_average()))
        print(header)
        med = {}
        for name, _ in rows:
            rs = results[name]
            med[name] = {k: statistics.median(r[k] for r in rs) for k in ("rps", "p99", "server_us", "client_us")}
            m = med[name]
            print("%-36s %12.0f %9.3f %10.1f %10.1f %7d"
                  % (name, m["rps"], m["p99"], m["server_us"], m["client_us"], sum(r["failed"] for r in rs)))
        h2, http_rps = med[rows[0][0]]["rps"], med[rows[-1][0]]["rps"]
        print("gRPC (nghttp2 client) / HTTP: %.2fx; target >= 50,000 decisions/s: %s"
              % (h2 / http_rps, "met" if h2 >= 50000 else "not met"))
        if args.grpc_load:
            print("gRPC (libgrpc++ client) / HTTP: %.2fx" % (med[rows[1][0]]["rps"] / http_rps))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
