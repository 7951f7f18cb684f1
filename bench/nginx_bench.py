#!/usr/bin/python3
"""nginx + the ratekeeper module against nginx's own limit_req, in one run, one nginx, the same load.

One nginx (2 workers), four locations answering with empty_gif: no limit; limit_req; ratekeeper EARRRL; ratekeeper
GCRA. Each limit is keyed by a header taking 1,000 values and set so high that nothing is refused (the work
measured is the decision, not the refusal page). wrk drives each location in turn, keep-alive over loopback, for
several passes, each pass in another order (the machine's speed drifts); each location's figure is its median over
the passes, and the ratios to limit_req are printed from the medians.

  bench/nginx_bench.py build/release/nginx/ngx_http_ratekeeper_module.so [--seconds 2] [--passes 8]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile

from benchlib import free_port, run_wrk, wait_http

CONF = """
load_module %(module)s;
%(user)s
daemon off;
master_process on;
worker_processes 2;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %(dir)s/body; proxy_temp_path %(dir)s/proxy; fastcgi_temp_path %(dir)s/fastcgi;
  uwsgi_temp_path %(dir)s/uwsgi; scgi_temp_path %(dir)s/scgi;
  limit_req_zone $http_x_client zone=lr:16m rate=1000000000r/s;
  ratekeeper_zone zone=e:16m algorithm=earrrl rate=1000000000r/s half_life=10s key_size=16;
  ratekeeper_zone zone=g:16m algorithm=gcra rate=1000000000r/s burst=1000 key_size=16;
  server {
    listen 127.0.0.1:%(port)d;
    location = /none { empty_gif; }
    location = /limit_req { limit_req zone=lr burst=1000 nodelay; empty_gif; }
    location = /earrrl { ratekeeper zone=e key=$http_x_client; ratekeeper_headers off; empty_gif; }
    location = /gcra { ratekeeper zone=g key=$http_x_client; ratekeeper_headers off; empty_gif; }
  }
}
"""

LUA = """
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", nil, {["X-Client"] = "client-" .. (n % 1000)})
end
"""


def wrk(url, seconds, connections, script):
    r = run_wrk(url, seconds, connections, script)
    return r["rps"], r["p99"], r["non2xx"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--passes", type=int, default=8)
    ap.add_argument("--connections", type=int, default=64)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="rk-nginx-bench-")
    port = free_port()
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(CONF % {"module": os.path.abspath(args.module), "dir": d, "port": port,
                        "user": "user root;" if os.geteuid() == 0 else ""})
    script = os.path.join(d, "clients.lua")
    with open(script, "w") as f:
        f.write(LUA)
    nginx = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-c", conf, "-p", d])
    try:
        base = "http://127.0.0.1:%d" % port
        wait_http(base + "/none")
        paths = ["/none", "/limit_req", "/earrrl", "/gcra"]
        runs = {p: [] for p in paths}
        for p in paths:
            wrk(base + p, 1, args.connections, script)  # warm up: keys in the zones, connections, caches
        for k in range(args.passes):
            order = paths[k % len(paths):] + paths[:k % len(paths)]
            if k % 2:
                order.reverse()
            for p in order:
                rps, p99, bad = wrk(base + p, args.seconds, args.connections, script)
                if bad:
                    raise SystemExit("%s answered %d non-2xx: the limits are meant never to refuse" % (p, bad))
                runs[p].append((rps, p99))
        med = {p: statistics.median(r for r, _ in runs[p]) for p in paths}
        print("nginx 2 workers, wrk -t1 -c%d, %d passes of %d s per location in rotating order, medians; "
              "1,000 clients by header, on %d cores" % (args.connections, args.passes, args.seconds, os.cpu_count()))
        for p in paths:
            rs = [r for r, _ in runs[p]]
            print("  %-12s %10.0f requests/s (passes %.0f-%.0f)   p99 median %.2f ms" %
                  (p, med[p], min(rs), max(rs), statistics.median(q for _, q in runs[p])))
        lr = med["/limit_req"]
        print("  ratio earrrl / limit_req   %.3f   (target >= 0.95)" % (med["/earrrl"] / lr))
        print("  ratio gcra / limit_req     %.3f   (target >= 0.95)" % (med["/gcra"] / lr))
        print("  ratio limit_req / none     %.3f" % (lr / med["/none"]))
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(timeout=15)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
