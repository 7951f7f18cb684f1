#!/usr/bin/python3
"""Redis benchmark, in one run against one fresh redis-server on loopback:
  1. ratekeeper's decisions/s through its Redis store (bench/redis_load.cc: the same script and pipelining client
     as `ratekeeper serve --redis`), with INFLIGHT decisions outstanding;
  2. the ceiling: redis-benchmark running the same script with EVALSHA, CLIENTS x PIPELINE = INFLIGHT in flight;
  3. the seeds' naive two-key EARRRL script (GET/SET of N and T) under the same redis-benchmark load.
Prints decisions/s for each and the ratios.

  bench/redis_bench.py build/release/bench/rk_redis_load [--seconds 5] [--inflight 256] [--keys 10000]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loader")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--inflight", type=int, default=256)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--algorithm", default="earrrl")
    a = ap.parse_args()
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

        script = subprocess.run([a.loader, "--print-script", a.algorithm], capture_output=True, text=True,
                                check=True).stdout
        sha = cli(port, "SCRIPT", "LOAD", script)
        args = subprocess.run([a.loader, "--print-args", a.algorithm], capture_output=True, text=True,
                              check=True).stdout.split("\n")[:-1]
        n = max(100000, int(ours * a.seconds))
        ceiling = redis_benchmark(port, clients, a.pipeline, n, a.keys,
                                  ["EVALSHA", sha, "1", "rk:rb:__rand_int__", *args])

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
        print("  redis-benchmark EVALSHA     %10.0f decisions/s   (same script: the ceiling)" % ceiling)
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
