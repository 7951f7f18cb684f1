#!/usr/bin/python3
"""Redis benchmark, in one run against one fresh redis-server on loopback:
  1. ratekeeper's decisions/s through its Redis store (bench/redis_load.cc: the same script and pipelining client
     as `ratekeeper serve --redis`), with INFLIGHT decisions outstanding;
  2. the ceiling: redis-benchmark running the same function with FCALL, CLIENTS x PIPELINE = INFLIGHT in flight;
  3. the seeds' naive two-key EARRRL script (GET/SET of N and T) under the same redis-benchmark load.
Prints decisions/s for each and the ratios.

  bench/redis_bench.py build/release/bench/rk_redis_load [--seconds 5] [--inflight 256] [--keys 10000]

With --cluster (issue 17, part 4; `bench/run redis_cluster`), instead: ratekeeper's decisions/s over --keys keys
through one plain redis-server (the baseline), a Redis Cluster of 1 primary and one of 3, each unpacked and packed
(--packed-hashes), with Redis's CPU per decision (INFO cpu used_cpu_user + used_cpu_sys, summed over the nodes,
over the FCALL and EVALSHA calls they counted) and the client's own (rk_redis_load's rusage), and the load
average.
"""
import argparse
import os
import re
import resource
import shutil
import socket
import subprocess
import tempfile
import time

import batched_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LUA = os.path.join(ROOT, "src", "store", "redis", "lua")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args, stdin=None):
    return subprocess.run(["redis-cli", "-p", str(port), *args], input=stdin, capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()


def redis_benchmark(port, clients, pipeline, requests, keys, command):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(clients), "-P", str(pipeline), "-n",
                          str(requests), "-r", str(keys), "-q", "--csv", *command],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    # --csv: a header line, then "name","rps",...
    for line in out.splitlines():
        fields = [f.strip('"') for f in line.split(",")]
        if len(fields) > 1 and re.fullmatch(r"[0-9.]+", fields[1]):
            return float(fields[1])
    raise RuntimeError("no figure in redis-benchmark's output:\n" + out)


def cluster_mode(a):
    """Decisions/s and CPU per decision through a plain Redis and Clusters of 1 and 3 primaries, in one run."""
    d = tempfile.mkdtemp(prefix="rk-redis-cluster-bench-")
    setups = [("one redis-server (not a Cluster)", 0), ("Redis Cluster, 1 primary", 1),
              ("Redis Cluster, 3 primaries", 3)]
    rows = []
    try:
        for name, primaries in setups:
            nodes = batched_bench.make_cluster(d, primaries) if primaries else [batched_bench.Redis(d)]
            scheme = "redis+cluster://" if primaries else "redis://"
            url = scheme + ",".join("127.0.0.1:%d" % n.port for n in nodes)
            try:
                for packed in (0, a.packed_hashes):
                    for n in nodes:
                        batched_bench.cli(n.port, "CONFIG", "RESETSTAT")
                    cpu0 = sum(batched_bench.redis_cpu(n.port) for n in nodes)
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    out = subprocess.run([a.loader, "--url", url, "--algorithm", a.algorithm, "--inflight",
                                          str(a.inflight), "--keys", str(a.keys), "--seconds", str(a.seconds),
                                          "--packed-hashes", str(packed)],
                                         capture_output=True, text=True, check=True, timeout=120).stdout
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = sum(batched_bench.redis_cpu(n.port) for n in nodes) - cpu0
                    calls = sum(batched_bench.redis_calls(n.port) for n in nodes)
                    client = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
                    rate = float(re.search(r"decisions_per_s=([0-9.]+)", out).group(1))
                    p99 = float(re.search(r"p99_us=([0-9.]+)", out).group(1))
                    rows.append((name, packed, rate, p99, cpu * 1e6 / max(calls, 1), client * 1e6 / max(calls, 1),
                                 batched_bench.load()))
                    for n in nodes:
                        batched_bench.cli(n.port, "FLUSHALL")
            finally:
                for n in nodes:
                    n.stop()
        base = rows[0][2]
        print("algorithm %s, %d in flight, %d keys, %s s each; CPU per decision: Redis's (summed over its nodes) "
              "and the client's (rk_redis_load)\n" % (a.algorithm, a.inflight, a.keys, a.seconds))
        print("| Redis | packed hashes | decisions/s | / one redis-server | p99 ms | Redis CPU us/decision "
              "| client CPU us/decision | load |")
        print("|---|---|---|---|---|---|---|---|")
        for name, packed, rate, p99, rcpu, ccpu, load in rows:
            print("| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %s |" % (name, packed or "off", rate, rate / base,
                                                                     p99 / 1000, rcpu, ccpu, load))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loader")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--inflight", type=int, default=256)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--algorithm", default="earrrl")
    ap.add_argument("--cluster", action="store_true", help="through Redis Clusters of 1 and 3 primaries")
    ap.add_argument("--packed-hashes", type=int, default=512, help="with --cluster: the packed runs' hashes")
    a = ap.parse_args()
    if a.cluster:
        return cluster_mode(a)
    clients = max(1, a.inflight // a.pipeline)

    d = tempfile.mkdtemp(prefix="rk-redis-bench-")
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                if cli(port, "PING") == "PONG":
                    break
            except subprocess.CalledProcessError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

        out = subprocess.run([a.loader, "--url", "redis://127.0.0.1:%d" % port, "--algorithm", a.algorithm,
                              "--inflight", str(a.inflight), "--keys", str(a.keys), "--seconds", str(a.seconds)],
                             capture_output=True, text=True, check=True, timeout=120).stdout
        ours = float(re.search(r"decisions_per_s=([0-9.]+)", out).group(1))
        p99 = float(re.search(r"p99_us=([0-9.]+)", out).group(1))

        library = subprocess.run([a.loader, "--print-library", a.algorithm], capture_output=True, text=True,
                                 check=True).stdout
        function = library.split("\n", 1)[0].split("=", 1)[1].strip()  # "#!lua name=<the function's name>"
        cli(port, "FUNCTION", "LOAD", "REPLACE", library)
        args = subprocess.run([a.loader, "--print-args", a.algorithm], capture_output=True, text=True,
                              check=True).stdout.split("\n")[:-1]
        n = max(100000, int(ours * a.seconds))
        ceiling = redis_benchmark(port, clients, a.pipeline, n, a.keys,
                                  ["FCALL", function, "1", "rk:rb:__rand_int__", *args])

        naive = None
        naive_path = os.path.join(LUA, "naive_earrrl.lua")
        if a.algorithm == "earrrl" and os.path.exists(naive_path):
            with open(naive_path) as f:
                text = f.read()
            m = re.search(r"^-- bench: (.*)$", text, re.M)  # the script names its KEYS/ARGV for a benchmark
            naive_sha = cli(port, "SCRIPT", "LOAD", text)
            naive_args = m.group(1).split() if m else ["2", "rk:nN:__rand_int__", "rk:nT:__rand_int__", "1000000000",
                                                       "10"]
            naive = redis_benchmark(port, clients, a.pipeline, n, a.keys, ["EVALSHA", naive_sha, *naive_args])

        print("algorithm %s, %d in flight (redis-benchmark: %d clients x pipeline %d), %d keys" %
              (a.algorithm, a.inflight, clients, a.pipeline, a.keys))
        print("  ratekeeper Redis store      %10.0f decisions/s   p99 %.0f us" % (ours, p99))
        print("  redis-benchmark FCALL       %10.0f decisions/s   (same function: the ceiling)" % ceiling)
        if naive is not None:
            print("  naive two-key EARRRL script %10.0f decisions/s" % naive)
        print("  ratio ours / ceiling        %10.2f   (target >= 0.70)" % (ours / ceiling))
        if naive is not None:
            print("  ratio ours / naive          %10.2f   (target > 1)" % (ours / naive))
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
