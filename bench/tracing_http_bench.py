#!/usr/bin/python3
"""What tracing costs the service (bench/run tracing): forward-auth decisions over HTTP (wrk, keep-alive, 1,000
clients, http_bench.py's rules) against `ratekeeper serve` with tracing off and with --otlp-endpoint at
--trace-sample-rate 0.01, spans posted to a receiver in this process (decoded nowhere: it answers 200). The requests
carry no trace context, so each decision is a new trace, sampled at the rate. Rounds alternate between the two
servers so that the machine's load falls on both alike; for each, decisions/s (wrk's) and the server's CPU time per
decision (user + system, from /proc: what counts on a machine whose cores wrk and others share), medians of the
rounds, and the ratios of tracing at 1% to off: decisions/s, and decisions per CPU second.

  bench/tracing_http_bench.py build/release/ratekeeper [--seconds 3] [--rounds 5] [--baseline OTHER_BINARY]

--baseline adds a third server, another binary (one built without tracing: main's before it, say) serving the same
with no tracing flags, in the same rounds, and the ratio of `off` to it: what tracing's code costs when it is off.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from benchlib import free_port, wait_http
from http_bench import RULES, wrk_cpu


class Receiver(BaseHTTPRequestHandler):
    spans_posts = 0

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.spans_posts += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline")
    args = ap.parse_args()
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="rk-tracing-bench-")
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    configs = {"off": [], "1%": ["--otlp-endpoint", "http://127.0.0.1:%d" % receiver.server_address[1],
                                 "--trace-sample-rate", "0.01"]}
    binaries = {name: args.binary for name in configs}
    if args.baseline:
        configs["base"] = []
        binaries["base"] = args.baseline
    procs, ports, results = {}, {}, {name: [] for name in configs}
    try:
        for name, extra in configs.items():
            ports[name] = free_port()
            procs[name] = subprocess.Popen(
                [binaries[name], "serve", "--config", rules, "--http", "127.0.0.1:%d" % ports[name],
                 "--admin", "127.0.0.1:%d" % free_port(), "--threads", "1", *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_http("http://127.0.0.1:%d/healthz" % ports[name])
        script = os.path.join(work, "clients.lua")
        for name in configs:  # warm: every client's key made
            wrk_cpu("http://127.0.0.1:%d/v1/auth/bench" % ports[name], 1, 16, script, [procs[name].pid])
        for _ in range(args.rounds):
            for name in configs:
                rps, _, non2xx, user, system = wrk_cpu("http://127.0.0.1:%d/v1/auth/bench" % ports[name],
                                                      args.seconds, 16, script, [procs[name].pid])
                if non2xx:
                    sys.exit("%s: %d answers not 2xx" % (name, non2xx))
                results[name].append((rps, user + system))
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=15)
        receiver.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print("tracing over HTTP: forward-auth, wrk -c16, %d rounds of %d s, one server thread each, load %s"
          % (args.rounds, args.seconds, load))
    med = {}
    for name, rs in results.items():
        rps = statistics.median(r[0] for r in rs)
        cpu = statistics.median(r[1] for r in rs)
        med[name] = (rps, cpu)
        print("  %-4s %9.0f decisions/s  %6.2f us CPU a decision  (decisions/s %.0f..%.0f)"
              % (name, rps, cpu, min(r[0] for r in rs), max(r[0] for r in rs)))
    print("  1%% / off: decisions/s %.3f, decisions per CPU second %.3f (spans posted in %d exports)"
          % (med["1%"][0] / med["off"][0], med["off"][1] / med["1%"][1], Receiver.spans_posts))
    if args.baseline:
        print("  off / base (%s): decisions/s %.3f, decisions per CPU second %.3f"
              % (args.baseline, med["off"][0] / med["base"][0], med["base"][1] / med["off"][1]))


if __name__ == "__main__":
    main()
