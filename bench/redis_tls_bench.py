#!/usr/bin/python3
"""What TLS costs ratekeeper's Redis store: decisions/s and p99 through rk_redis_load (the client and script of
`ratekeeper serve --redis`) against one redis-server, over its plain port (the baseline) and its TLS port
(rediss://, the certificates of tests/support/make_redis_certs.sh), alternating, `--passes` times each; prints each
pass,
the medians, the ratio TLS/plain and the load average.

  bench/redis_tls_bench.py build/release/bench/rk_redis_load [--seconds 5] [--passes 3] [--inflight 256]
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(loader, url, ca, a):
    tls = ["--tls-ca", ca] if url.startswith("rediss") else []
    out = subprocess.run([loader, "--url", url, *tls, "--algorithm", "earrrl", "--inflight",
                          str(a.inflight), "--keys", "10000", "--seconds", str(a.seconds)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return (float(re.search(r"decisions_per_s=([0-9.]+)", out).group(1)),
            float(re.search(r"p99_us=([0-9.]+)", out).group(1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loader")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=256)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="rk-redis-tls-bench-")
    subprocess.run([os.path.join(ROOT, "tests", "support", "make_redis_certs.sh"), d], check=True)
    port, tls_port = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", d, "--tls-port", str(tls_port),
                              "--tls-cert-file", os.path.join(d, "server.crt"),
                              "--tls-key-file", os.path.join(d, "server.key"),
                              "--tls-ca-cert-file", os.path.join(d, "ca.crt"), "--tls-auth-clients", "no"],
                             stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        ca = os.path.join(d, "ca.crt")
        plain, tls = [], []
        for i in range(a.passes):
            plain.append(run(a.loader, "redis://127.0.0.1:%d" % port, ca, a))
            tls.append(run(a.loader, "rediss://127.0.0.1:%d" % tls_port, ca, a))
            print("pass %d: plain %.0f decisions/s (p99 %.0f us), TLS %.0f decisions/s (p99 %.0f us)"
                  % (i + 1, plain[-1][0], plain[-1][1], tls[-1][0], tls[-1][1]))
        p, t = statistics.median(x[0] for x in plain), statistics.median(x[0] for x in tls)
        print("median: plain %.0f decisions/s, TLS %.0f decisions/s, TLS/plain %.2f; p99 plain %.0f us, TLS %.0f us"
              % (p, t, t / p, statistics.median(x[1] for x in plain), statistics.median(x[1] for x in tls)))
        print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
