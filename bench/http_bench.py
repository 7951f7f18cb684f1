#!/usr/bin/python3
"""HTTP benchmark: wrk over loopback keep-alive against ratekeeper's forward-auth endpoint, and in the same run
against nginx answering `return 200` directly and with `limit_req`, at equal worker threads. Prints requests/s
and p99 for each, the server's CPU time per request (user and system, from /proc: what counts on a machine whose
cores wrk shares, and less sensitive than requests/s to other load), and ratekeeper's ratios to nginx; then p99 for each at about half of its saturating load (closed
loop, fewer connections).

  bench/http_bench.py build/release/ratekeeper [--seconds 5] [--threads 1] [--tls] [--baseline OTHER_BINARY]
                      [--no-half-load] [--instructions N [--keep DIR]]

--tls adds a second ratekeeper serving the same over TLS (--tls-cert, a P-256 certificate made by
tests/support/make_certs.sh), wrk speaking HTTPS over keep-alive connections (so the handshakes are few; each request's
cost is the record layer's), and prints its ratio to the plaintext one.

--baseline adds a second ratekeeper binary (main's, say) serving the same, measured in the same run right after
the first, and prints the first's ratio to it: a change is kept only if this shows it. --no-half-load skips the
closed-loop measurement at half load, for quicker repeated runs.

--instructions N counts instead, under callgrind, the user-space instructions and heap allocations per request
(a run of 3N requests less one of N, over 2N, so start-up cancels out): deterministic, whatever the machine's load.
--keep DIR keeps callgrind's files, to see where the instructions go:

  bench/http_bench.py build/release/ratekeeper --instructions 1000 --threads 2 --baseline OTHER --keep /tmp/cg
  callgrind_annotate --inclusive=yes /tmp/cg/cg1-3000     # cg0-*: nginx, cg1-*: ratekeeper, cg2-*: the baseline
"""
import argparse
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile

from benchlib import free_port, halt_polling, run_wrk, wait_http

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RULES = """
domain: bench
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: gcra, burst: 1000}
forward_auth:
  descriptors:
    - entries: [{key: client, from: header, header: X-Client}]
"""

NGINX = """
daemon off;
worker_processes %(threads)d;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %(dir)s/body;
  proxy_temp_path %(dir)s/proxy;
  limit_req_zone $http_x_client zone=clients:16m rate=1000000000r/s;
  server {
    listen 127.0.0.1:%(port)d;
    location = /plain { return 200; }
    location = /limit_req { limit_req zone=clients burst=1000 nodelay; empty_gif; }
  }
}
"""

# 1,000 clients, one header value per request, chosen in turn.
LUA = """
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", nil, {["X-Client"] = "client-" .. (n % 1000)})
end
"""


def cpu_seconds(pids):
    """User and system CPU seconds so far of the processes `pids` (every thread of each), from /proc/PID/stat."""
    user = system = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        user += int(fields[11])
        system += int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def children(pid):
    """The processes whose parent is `pid` (nginx's workers)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError):
                pass
    return out


def wrk(url, seconds, connections, script):
    with open(script, "w") as f:
        f.write(LUA)
    r = run_wrk(url, seconds, connections, script)
    return r["rps"], r["p99"], r["non2xx"]


def wrk_cpu(url, seconds, connections, script, pids):
    """wrk's requests/s, p99 and non-2xx count, and the servers' user and system CPU microseconds per request."""
    with open(script, "w") as f:
        f.write(LUA)
    before = cpu_seconds(pids)
    r = run_wrk(url, seconds, connections, script)
    after = cpu_seconds(pids)
    n = max(r["requests"], 1)
    return r["rps"], r["p99"], r["non2xx"], (after[0] - before[0]) * 1e6 / n, (after[1] - before[1]) * 1e6 / n


def sequential_requests(port, path, n, connections=4):
    """n keep-alive GETs of `path`, each answered before the next is sent, over `connections` connections in turn."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    bufs = [b""] * connections
    for i in range(n):
        k = i % connections
        socks[k].sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Client: client-%d\r\n\r\n"
                         % (path.encode(), i % 1000))
        buf = bufs[k]
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                head = buf[:end].lower()
                length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
                if len(buf) >= end + 4 + length:
                    if not head.startswith(b"http/1.1 200"):
                        raise SystemExit("not 200: %r" % head[:40])
                    buf = buf[end + 4 + length:]
                    break
            more = socks[k].recv(65536)
            if not more:
                raise SystemExit("the server closed a connection")
            buf += more
        bufs[k] = buf
    for s in socks:
        s.close()


def callgrind_instructions(command, url, path, port, n, out, stop_signal):
    """User-space instructions of `command` (a server) over n requests, from start to stop, under callgrind."""
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + command,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(url, seconds=60)
        sequential_requests(port, path, n)
    finally:
        proc.send_signal(stop_signal)
        proc.wait(timeout=60)
    total = allocations = 0
    for name in os.listdir(os.path.dirname(out)):
        if name.startswith(os.path.basename(out)):
            with open(os.path.join(os.path.dirname(out), name)) as f:
                lines = f.read().splitlines()
            total += sum(int(line.split()[1]) for line in lines if line.startswith("totals:"))
            allocations += heap_allocations(lines)
    return total, allocations


ALLOCATORS = {"malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign"}


def heap_allocations(lines):
    """Calls of the C allocator (operator new calls malloc) in a callgrind output file. Its names are compressed:
    "cfn=(7) malloc" the first time, "cfn=(7)" after; each "cfn=" line is followed by "calls=N ..."."""
    names, calls, callee = {}, 0, None
    for line in lines:
        if line.startswith(("fn=", "cfn=")):
            ref = line.split("=", 1)[1]
            if ref.startswith("("):
                key, _, rest = ref[1:].partition(")")
                if rest.strip():
                    names[key] = rest.strip()
                ref = names.get(key, "")
            callee = ref if line.startswith("cfn=") else None
        elif line.startswith("calls=") and callee is not None:
            if callee in ALLOCATORS:
                calls += int(line[6:].split()[0])
            callee = None
    return calls


def instructions(args, work):
    """--instructions: user-space instructions per request of each server, and ratekeeper's ratios."""
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    nginx_port = free_port()
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write("master_process off;\n" + NGINX % {"threads": 1, "dir": work, "port": nginx_port})
    servers = [("nginx return 200", None, "/plain", nginx_port)]
    for name, binary in [("ratekeeper /v1/auth", args.binary), ("baseline /v1/auth", args.baseline)]:
        if binary:
            servers.append((name, binary, "/v1/auth/bench", free_port()))
    n = args.instructions
    per = {}
    print("user-space instructions per request (callgrind; %d and %d requests over 4 connections; ratekeeper with"
          " --threads %d; load average %.1f)" % (n, 3 * n, args.threads, os.getloadavg()[0]))
    for i, (name, binary, path, port) in enumerate(servers):
        if binary:
            command = [binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % port, "--admin",
                       "127.0.0.1:%d" % free_port(), "--threads", str(args.threads), "--log-level", "error"]
            stop, url = signal.SIGTERM, "http://127.0.0.1:%d/readyz" % port
        else:
            command = ["nginx", "-p", work, "-c", os.path.join(work, "nginx.conf"), "-e", "stderr"]
            stop, url = signal.SIGQUIT, "http://127.0.0.1:%d/plain" % port
        counts = [callgrind_instructions(command, url, path, port, k, os.path.join(work, "cg%d-%d" % (i, k)), stop)
                  for k in (n, 3 * n)]
        per[name] = (counts[1][0] - counts[0][0]) / (2 * n)
        print("%-22s %10.0f   heap allocations/request %5.2f"
              % (name, per[name], (counts[1][1] - counts[0][1]) / (2 * n)))
    print("ratekeeper / nginx return 200: %.2fx" % (per["ratekeeper /v1/auth"] / per["nginx return 200"]))
    if args.baseline:
        print("ratekeeper / baseline:         %.2fx" % (per["ratekeeper /v1/auth"] / per["baseline /v1/auth"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="server threads, and nginx worker processes")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--tls", action="store_true", help="also ratekeeper over TLS (HTTPS)")
    ap.add_argument("--baseline", help="another ratekeeper binary, measured in the same run")
    ap.add_argument("--no-half-load", action="store_true", help="saturating load only")
    ap.add_argument("--instructions", type=int, metavar="N",
                    help="count user-space instructions and heap allocations per request under callgrind instead"
                         " (N and 3N requests)")
    ap.add_argument("--keep", metavar="DIR",
                    help="with --instructions: keep callgrind's files in DIR (callgrind_annotate --inclusive=yes"
                         " DIR/cg1-3000.* shows where ratekeeper's instructions go)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="rk-httpbench-")
    if args.instructions:
        try:
            return instructions(args, work)
        finally:
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for name in os.listdir(work):
                    if name.startswith("cg"):
                        shutil.move(os.path.join(work, name), os.path.join(args.keep, name))
            shutil.rmtree(work, ignore_errors=True)
    procs = []
    nginx = None
    try:
        rules = os.path.join(work, "rules.yaml")
        with open(rules, "w") as f:
            f.write(RULES)
        rk_port, admin_port, nginx_port = free_port(), free_port(), free_port()
        procs.append(subprocess.Popen([args.binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % rk_port,
                                       "--admin", "127.0.0.1:%d" % admin_port, "--threads", str(args.threads),
                                       "--log-level", "error"]))
        if args.baseline:
            base_port = free_port()
            procs.append(subprocess.Popen([args.baseline, "serve", "--config", rules, "--http",
                                           "127.0.0.1:%d" % base_port, "--admin", "127.0.0.1:%d" % free_port(),
                                           "--threads", str(args.threads), "--log-level", "error"]))
            wait_http("http://127.0.0.1:%d/readyz" % base_port)
        with open(os.path.join(work, "nginx.conf"), "w") as f:
            f.write(NGINX % {"threads": args.threads, "dir": work, "port": nginx_port})
        nginx = subprocess.Popen(["nginx", "-p", work, "-c", os.path.join(work, "nginx.conf"), "-e", "stderr"],
                                 stderr=subprocess.DEVNULL)
        procs.append(nginx)
        wait_http("http://127.0.0.1:%d/readyz" % rk_port)
        wait_http("http://127.0.0.1:%d/plain" % nginx_port)
        if args.tls:
            subprocess.run(["sh", os.path.join(ROOT, "tests", "support", "make_certs.sh"), work], check=True)
            tls_port = free_port()
            procs.append(subprocess.Popen([args.binary, "serve", "--config", rules, "--http", "127.0.0.1:%d" % tls_port,
                                           "--admin", "127.0.0.1:%d" % free_port(), "--threads", str(args.threads),
                                           "--log-level", "error", "--tls-cert", os.path.join(work, "server.crt"),
                                           "--tls-key", os.path.join(work, "server.key")]))
            wait_http("https://127.0.0.1:%d/readyz" % tls_port, context=ssl.create_default_context(
                cafile=os.path.join(work, "ca.crt")))

        workers = children(nginx.pid)
        targets = [
            ("nginx return 200", "http://127.0.0.1:%d/plain" % nginx_port, workers),
            ("nginx limit_req", "http://127.0.0.1:%d/limit_req" % nginx_port, workers),
            ("ratekeeper /v1/auth", "http://127.0.0.1:%d/v1/auth/bench" % rk_port, [procs[0].pid]),
        ]
        if args.baseline:
            targets.append(("baseline /v1/auth", "http://127.0.0.1:%d/v1/auth/bench" % base_port, [procs[1].pid]))
        if args.tls:
            targets.append(("ratekeeper TLS", "https://127.0.0.1:%d/v1/auth/bench" % tls_port, [procs[-1].pid]))
        script = os.path.join(work, "clients.lua")
        for _, url, _ in targets:  # warm up
            wrk(url, 1, args.connections, script)
        saturated = {}
        print("wrk -t1 -c%d -d%ds, 1,000 clients; servers with %d thread(s)/worker(s), on %d cores; load average %.1f;"
              " %s" % (args.connections, args.seconds, args.threads, os.cpu_count(), os.getloadavg()[0],
                       halt_polling()))
        print("%-22s %12s %10s %8s %14s %14s" % ("", "requests/s", "p99 ms", "non-2xx", "user us/req", "system us/req"))
        cpu = {}
        for name, url, pids in targets:
            rps, p99, bad, user, system = wrk_cpu(url, args.seconds, args.connections, script, pids)
            saturated[name] = (rps, p99)
            cpu[name] = user + system
            print("%-22s %12.0f %10.3f %8d %14.2f %14.2f" % (name, rps, p99, bad, user, system))
        rk = saturated["ratekeeper /v1/auth"][0]
        print("ratekeeper / nginx return 200: %.2fx   (target >= 0.80)" % (rk / saturated["nginx return 200"][0]))
        print("ratekeeper / nginx limit_req:  %.2fx" % (rk / saturated["nginx limit_req"][0]))
        print("CPU per request, ratekeeper / nginx return 200: %.2fx" % (cpu["ratekeeper /v1/auth"] /
                                                                     max(cpu["nginx return 200"], 1e-9)))
        if args.baseline:
            base = saturated["baseline /v1/auth"][0]
            print("baseline / nginx return 200:   %.2fx" % (base / saturated["nginx return 200"][0]))
            print("ratekeeper / baseline:         %.2fx" % (rk / base))
            print("CPU per request, ratekeeper / baseline: %.2fx" % (cpu["ratekeeper /v1/auth"] /
                                                             max(cpu["baseline /v1/auth"], 1e-9)))
        if args.tls:
            print("ratekeeper TLS / plaintext:    %.2fx" % (saturated["ratekeeper TLS"][0] / rk))
        if args.no_half_load:
            return

        # Half of each one's saturating load: fewer connections, each sending its next request as soon as the
        # answer is in (closed loop), as many as come closest to half the saturating rate. (wrk's own pauses are
        # whole milliseconds, coarser than what is measured here.)
        print("\nat about half of each one's saturating load (closed loop, fewer connections):")
        print("%-22s %12s %10s %12s" % ("", "requests/s", "p99 ms", "connections"))
        for name, url, _ in targets:
            target = saturated[name][0] / 2
            best = None
            for connections in range(1, 9):
                rps, _, _ = wrk(url, 1, connections, script)
                if best is None or abs(rps - target) < abs(best[1] - target):
                    best = (connections, rps)
                if rps > target:
                    break
            rps, p99, _ = wrk(url, args.seconds, best[0], script)
            print("%-22s %12.0f %10.3f %12d%s" % (name, rps, p99, best[0],
                                                  "   (target < 1 ms)" if name == "ratekeeper /v1/auth" else ""))
    finally:
        for p in procs:
            p.send_signal(signal.SIGQUIT if p is nginx else signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
