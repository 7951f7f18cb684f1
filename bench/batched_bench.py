#!/usr/bin/python3
"""`sharing: batched` benchmark (issue 17), in one run on this machine, every figure against a baseline measured in
the same run. wrk over loopback keep-alive sends forward-auth checks of ONE hot key (X-Client: hot) to
`ratekeeper serve` processes:
  1. one server, the embedded store alone (no --redis): the baseline;
  2. one server deciding a `sharing: batched` domain through Redis: its ratio to 1 (target >= 0.9), and Redis calls
     per decision (Redis's own INFO commandstats over the decisions wrk counted; target <= 0.01);
  3. a fleet of 3 servers on one Redis, exact sharing (a round trip a decision), one wrk each, at once;
  4. the same fleet with batched sharing: its combined decisions/s over 3's (target >= 5x);
  3 and 4 run twice: with one descriptor a request, and with --descriptors (8) descriptors a request, every one the
  same hot key (a request decided against several limits, as Envoy sends them), driven identically for exact and
  batched; each line gives the CPU time a decision costs in the servers, in wrk and in Redis (/proc, getrusage,
  INFO cpu), which says what bounds the figure on this machine;
  5. exact sharing through a Redis Cluster of 1 and of 3 primaries (the same fleet): decisions/s, and Redis CPU
     per decision (INFO cpu, user + sys, summed over the primaries);
  6. with --h2-load (bench/grpc_h2_load.cc): the fleet of 3 over gRPC, Envoy's rate-limit API as Envoy calls it
     (HTTP/2, many streams on few connections), the hot key, one descriptor a request and then --descriptors; exact
     and batched fleets up at once, one generator per server, at each of --grpc-inflight streams per server in turn
     (exact, then batched, at the same level: driven identically, and a neighbour's load hits both alike). The same
     CPU accounting per decision. A run counts only if every answer was checked well-formed and OK (the limit is far
     above the load), no call failed and no decision was a fallback (Redis not answering); the best exact figure is
     set against the best batched one.
On a 2-core machine the servers, wrk and Redis share the cores: the load average is printed with every figure.

  bench/batched_bench.py build/release/ratekeeper [--seconds 5] [--connections 32] [--descriptors 8] [--no-cluster]
      [--h2-load build/release/bench/rk_grpc_h2_load [--grpc-inflight 16,64,256] [--grpc-connections 2] [--only-grpc]]
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from benchlib import free_port, halt_polling, parse_grpc_load, run_wrk, wait_http

# Every answer must be OK, so that exact and batched decide the same thing. GCRA at 1e9/s refuses a hit whose `now`
# trails the key's time by more than `burst` ns: bursts of 1,000 (1 us) and even 1,000,000 (1 ms) refused a few
# answers in 10,000 on the loaded shared machine, from the embedded store alone too (likely a thread descheduled
# between reading the clock and taking the key's lock); 1e9 is a second of tolerance.
RULES = """
domain: bench
%s
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: gcra, burst: 1000000000}
forward_auth:
  descriptors:
%s"""
DESCRIPTOR = "    - entries: [{key: client, from: header, header: X-Client}]\n"

HOT = 'request = function() return wrk.format("GET", nil, {["X-Client"] = "hot"}) end\n'


def load():
    return open("/proc/loadavg").read().split()[0]


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def info_field(port, section, name):
    for line in cli(port, "INFO", section).splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def redis_calls(port):
    """Commands Redis ran that the batcher or the exact path send (FCALL, EVAL, EVALSHA), from INFO commandstats."""
    total = 0
    for line in cli(port, "INFO", "commandstats").splitlines():
        if line.startswith(("cmdstat_eval", "cmdstat_fcall")):
            total += int(line.split("calls=")[1].split(",")[0])
    return total


def redis_cpu(port):
    return float(info_field(port, "cpu", "used_cpu_user")) + float(info_field(port, "cpu", "used_cpu_sys"))


def proc_cpu(pid):
    """CPU seconds (user + system, every thread) a running process has used."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    """CPU seconds the waited-for children (the wrk runs) have used."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Redis:
    def __init__(self, d, cluster=False):
        self.port = free_port()
        while self.port > 55000:
            self.port = free_port()
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes-%d.conf" % self.port] if cluster else []
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", d, *extra], stdout=subprocess.DEVNULL)
        for _ in range(200):
            try:
                if "PONG" in cli(self.port, "PING"):
                    return
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def make_cluster(d, primaries):
    nodes = [Redis(d, cluster=True) for _ in range(primaries)]
    if primaries == 1:
        cli(nodes[0].port, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
    else:
        subprocess.run(["redis-cli", "--cluster", "create", *["127.0.0.1:%d" % n.port for n in nodes],
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 30
    while not all("cluster_state:ok" in cli(n.port, "CLUSTER", "INFO") for n in nodes):
        if time.monotonic() > deadline:
            raise SystemExit("the cluster did not become ok")
        time.sleep(0.1)
    return nodes


class Serve:
    def __init__(self, binary, d, sharing, redis_url=None, descriptors=1, grpc=False):
        self.dir = tempfile.mkdtemp(dir=d)
        rules = os.path.join(self.dir, "rules.yaml")
        with open(rules, "w") as f:
            f.write(RULES % (("sharing: %s" % sharing) if sharing else "", DESCRIPTOR * descriptors))
        self.port, admin = free_port(), free_port()
        self.grpc = "127.0.0.1:%d" % free_port() if grpc else None
        self.proc = subprocess.Popen([binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % self.port,
                                      "--admin", "127.0.0.1:%d" % admin, "--log-level", "error",
                                      *(["--grpc", self.grpc] if grpc else []),
                                      *(["--redis", redis_url, "--redis-timeout", "2s"] if redis_url else [])],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d/v1/auth/bench" % self.port
        self.admin = "http://127.0.0.1:%d" % admin
        wait_http(self.admin + "/readyz")

    def fallbacks(self):
        """Decisions the domain's failure policy answered because Redis did not (0 for a fair exact figure)."""
        text = urllib.request.urlopen(self.admin + "/metrics", timeout=10).read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("ratekeeper_redis_fallbacks_total"))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def fleet_rps(servers, seconds, connections, script):
    """One wrk per server, all at once; their decisions/s summed, the requests, and the answers that were not 200
    with the socket errors (the limit is far above the load: none should be)."""
    cmds = [["wrk", "-t1", "-c%d" % connections, "-d%ds" % seconds, "-s", script, s.url] for s in servers]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in cmds]
    total, requests, bad = 0.0, 0, 0
    for p in procs:
        out = p.communicate()[0]
        for line in out.splitlines():
            if line.startswith("Requests/sec:"):
                total += float(line.split()[1])
            if " requests in " in line:
                requests += int(line.split()[0])
            if "Non-2xx or 3xx responses:" in line:
                bad += int(line.split()[-1])
            if line.strip().startswith("Socket errors:"):  # Socket errors: connect 0, read 0, write 0, timeout 0
                bad += sum(int(x.strip(",")) for x in line.split()[3::2])
    return total, requests, bad


def grpc_fleet(servers, h2_load, seconds, inflight, connections, descriptors):
    """One rk_grpc_h2_load per server's gRPC port, all at once, every call the hot key (--clients 1) `descriptors`
    times: requests/s summed, the answers the generators checked, the failed calls, the OVER_LIMIT answers, and the
    first error."""
    cmds = [[h2_load, s.grpc, "--seconds", str(seconds), "--inflight", str(inflight), "--connections",
             str(connections), "--clients", "1", "--descriptors", str(descriptors)] for s in servers]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    total = {"rps": 0.0, "answered": 0, "failed": 0, "over_limit": 0, "error": ""}
    for p in procs:
        out, err = p.communicate(timeout=seconds + 60)
        r = parse_grpc_load(out)
        if r is None or r["answered"] is None:
            total["failed"] += 1
            total["error"] = total["error"] or ("no report: " + err.strip())
            continue
        total["rps"] += r["rate"]
        for k in ("answered", "failed", "over_limit"):
            total[k] += r[k]
        if r["failed"] and not total["error"]:
            total["error"] = err.strip()
    return total


def grpc_fleets(binary, d, redis_port, h2_load, seconds, levels, connections, descriptor_counts):
    """6: the fleets of 3 over gRPC, exact and batched, at each level of streams in flight per server."""
    url = "redis://127.0.0.1:%d" % redis_port
    fleets = {sharing: [Serve(binary, d, sharing, url, grpc=True) for _ in range(3)]
              for sharing in ("exact", "batched")}
    print("6. gRPC (rk_grpc_h2_load: HTTP/2, %d connections a server, 'inflight' streams a server), one hot key"
          % connections)
    try:
        for fleet in fleets.values():
            grpc_fleet(fleet, h2_load, 1, levels[-1], connections, 1)  # warm-up
        for descriptors in descriptor_counts:
            best = {}
            for inflight in levels:
                for sharing, fleet in fleets.items():
                    calls0, rcpu0, gcpu0 = redis_calls(redis_port), redis_cpu(redis_port), children_cpu()
                    scpu0, fb0 = sum(proc_cpu(s.proc.pid) for s in fleet), sum(s.fallbacks() for s in fleet)
                    r = grpc_fleet(fleet, h2_load, seconds, inflight, connections, descriptors)
                    gcpu, scpu = children_cpu() - gcpu0, sum(proc_cpu(s.proc.pid) for s in fleet) - scpu0
                    calls, rcpu = redis_calls(redis_port) - calls0, redis_cpu(redis_port) - rcpu0
                    fallbacks = sum(s.fallbacks() for s in fleet) - fb0
                    n = max(1, r["answered"] * descriptors)
                    rate = r["rps"] * descriptors
                    valid = r["answered"] > 0 and r["failed"] == 0 and r["over_limit"] == 0 and fallbacks == 0
                    if valid and rate > best.get(sharing, (0, 0))[0]:
                        best[sharing] = (rate, inflight)
                    print("   %-7s %d/request inflight %4d x3 %9.0f decisions/s   OK %d of %d answers, failed %d"
                          "   Redis calls/decision %.4f   CPU us/decision: servers %.2f h2load %.2f Redis %.2f"
                          "   fallbacks %d   (load %s)%s"
                          % (sharing, descriptors, inflight, rate, r["answered"] - r["over_limit"], r["answered"],
                             r["failed"], calls / n, scpu / n * 1e6, gcpu / n * 1e6, rcpu / n * 1e6, fallbacks,
                             load(), "" if valid else "   NOT A FIGURE" + (": " + r["error"] if r["error"] else "")))
            if len(best) == 2:
                print("   gRPC batched over exact, %d/request, best of each %6.2fx   (batched %.0f at %d in flight,"
                      " exact %.0f at %d; target >= 5)   (load %s)"
                      % (descriptors, best["batched"][0] / best["exact"][0], best["batched"][0], best["batched"][1],
                         best["exact"][0], best["exact"][1], load()))
            else:
                print("   gRPC batched over exact, %d/request: no ratio, a side has no valid run" % descriptors)
    finally:
        for fleet in fleets.values():
            for s in fleet:
                s.stop()


def wrk_runs(a, d, script):
    """1 to 5, over HTTP forward-auth under wrk."""
    print("wrk -t1 -c%d -d%ds, one hot key, forward-auth; %d cores; %s"
          % (a.connections, a.seconds, os.cpu_count(), halt_polling()))
    # 1 and 2: one server.
    s = Serve(a.binary, d, None)
    run_wrk(s.url, 1, a.connections, script)  # warm up
    mem = run_wrk(s.url, a.seconds, a.connections, script)
    s.stop()
    print("1. embedded store alone          %9.0f decisions/s   (load %s)" % (mem["rps"], load()))
    redis = Redis(d)
    url = "redis://127.0.0.1:%d" % redis.port
    s = Serve(a.binary, d, "batched", url)
    run_wrk(s.url, 1, a.connections, script)
    calls0 = redis_calls(redis.port)
    bat = run_wrk(s.url, a.seconds, a.connections, script)
    calls = redis_calls(redis.port) - calls0
    s.stop()
    print("2. batched, one server           %9.0f decisions/s   %.2fx of 1 (target >= 0.9)   (load %s)"
          % (bat["rps"], bat["rps"] / mem["rps"], load()))
    print("   Redis calls per decision      %9.5f              (%d calls, %d decisions; target <= 0.01)"
          % (calls / bat["requests"], calls, bat["requests"]))
    # 3 and 4: fleets of 3, one descriptor a request and then several, each the hot key.
    for descriptors in sorted({1, a.descriptors}):
        results = {}
        for sharing in ("exact", "batched"):
            fleet = [Serve(a.binary, d, sharing, url, descriptors) for _ in range(3)]
            fleet_rps(fleet, 1, a.connections, script)
            calls0, rcpu0, wcpu0 = redis_calls(redis.port), redis_cpu(redis.port), children_cpu()
            scpu0 = sum(proc_cpu(s.proc.pid) for s in fleet)
            rps, requests, bad = fleet_rps(fleet, a.seconds, a.connections, script)
            wcpu, scpu = children_cpu() - wcpu0, sum(proc_cpu(s.proc.pid) for s in fleet) - scpu0
            calls, rcpu = redis_calls(redis.port) - calls0, redis_cpu(redis.port) - rcpu0
            fallbacks = sum(s.fallbacks() for s in fleet)
            for s in fleet:
                s.stop()
            decisions = max(1, requests * descriptors)
            results[sharing] = rps * descriptors
            print("%s. fleet of 3, %-7s %d/request %9.0f decisions/s   Redis calls/decision %.4f   CPU us/decision:"
                  " servers %.2f wrk %.2f Redis %.2f   fallbacks %d   not 200 %d   (load %s)%s"
                  % ("3" if sharing == "exact" else "4", sharing, descriptors, rps * descriptors, calls / decisions,
                     scpu / decisions * 1e6, wcpu / decisions * 1e6, rcpu / decisions * 1e6, fallbacks, bad, load(),
                     "   NOT A FIGURE" if bad or fallbacks else ""))
        print("   batched over exact, %d/request %9.2fx             (target >= 5)"
              % (descriptors, results["batched"] / results["exact"]))
    redis.stop()
    if a.no_cluster:
        return
    # 5: Redis Cluster of 1 and 3 primaries, the fleet of 3, exact and batched.
    for primaries in (1, 3):
        nodes = make_cluster(d, primaries)
        curl = "redis+cluster://" + ",".join("127.0.0.1:%d" % n.port for n in nodes)
        for sharing in ("exact", "batched"):
            fleet = [Serve(a.binary, d, sharing, curl) for _ in range(3)]
            fleet_rps(fleet, 1, a.connections, script)
            cpu0 = sum(redis_cpu(n.port) for n in nodes)
            rps, requests, bad = fleet_rps(fleet, a.seconds, a.connections, script)
            cpu = sum(redis_cpu(n.port) for n in nodes) - cpu0
            for s in fleet:
                s.stop()
            print("5. Cluster of %d primar%s, %-7s %9.0f decisions/s   Redis CPU %.2f us/decision   not 200 %d"
                  "   (load %s)" % (primaries, "y" if primaries == 1 else "ies", sharing, rps,
                                    cpu / max(1, requests) * 1e6, bad, load()))
        for n in nodes:
            n.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--descriptors", type=int, default=8, help="descriptors a request in the second pair of fleets")
    ap.add_argument("--no-cluster", action="store_true", help="skip 5 (Redis Cluster)")
    ap.add_argument("--h2-load", help="bench/grpc_h2_load.cc's binary: also run 6, the fleets over gRPC")
    ap.add_argument("--grpc-inflight", default="16,64,256", help="6: streams in flight per server, each level in turn")
    ap.add_argument("--grpc-connections", type=int, default=2, help="6: HTTP/2 connections per server")
    ap.add_argument("--only-grpc", action="store_true", help="run 6 alone")
    a = ap.parse_args()
    levels = [int(x) for x in a.grpc_inflight.split(",")]
    d = tempfile.mkdtemp(prefix="rk-batched-bench-")
    script = os.path.join(d, "hot.lua")
    with open(script, "w") as f:
        f.write(HOT)
    try:
        if not a.only_grpc:
            wrk_runs(a, d, script)
        if a.h2_load:
            redis = Redis(d)
            try:
                grpc_fleets(a.binary, d, redis.port, a.h2_load, a.seconds, levels, a.grpc_connections,
                            sorted({1, a.descriptors}))
            finally:
                redis.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
