"""bench/redis_state.py (also `bench/run redis_state`): the cost of each algorithm's state in Redis, this build's
layout against a baseline's (by default `main`, read with git), in one run on one fresh redis-server.

  bench/redis_state.py build/release/bench/rk_redis_load [--before main] [--keys 100000] [--rounds 10]

For each algorithm and each side, the very script each side sends (this build's from `rk_redis_load --print-script`;
the baseline's put together from its git tree as its scripts.cc did) is run from redis-cli --pipe with the ARGV
rk_redis_load gives (Redis's clock, cost 1, limits that never refuse), on keys named as each side names them:
  bytes/key        INFO memory's used_memory before and after one decision on each of --keys keys, / DBSIZE
  usec/call new    INFO commandstats' usec_per_call for EVALSHA over those first decisions (a state created)
  usec/call again  the same over --rounds decisions on each of 10,000 of those keys (a state read and written)
Prints a markdown table and the load average; Redis's own CPU per call is what it measures, so the client's speed
and the machine's other load weigh less than in a throughput figure, but a loaded machine still slows Redis.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGORITHMS = ["earrrl", "gcra", "token_bucket", "leaky_bucket", "leaky_queue", "fixed_window", "sliding_log",
              "sliding_window"]
# The baseline's scripts: its tag per algorithm (scripts.cc's script_text: the name, '.N' from layout 2) and the
# Lua files after its prelude.
BEFORE_TAGS = {"earrrl": "earrrl", "gcra": "gcra", "leaky_queue": "leaky_queue", "token_bucket": "token_bucket.2",
               "leaky_bucket": "leaky_bucket.2", "fixed_window": "fixed_window.2", "sliding_log": "sliding_log",
               "sliding_window": "sliding_window.2"}
PARTS = {"earrrl": ["earrrl"], "gcra": ["gcra"], "leaky_queue": ["gcra"], "token_bucket": ["fluid"],
         "leaky_bucket": ["fluid"], "fixed_window": ["windows", "fixed_window"],
         "sliding_log": ["windows", "sliding_log"], "sliding_window": ["windows", "sliding_window"]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*args):
    out = ["*%d\r\n" % len(args)]
    for a in args:
        b = str(a)
        out.append("$%d\r\n%s\r\n" % (len(b.encode()), b))
    return "".join(out)


class Redis:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rk-redis-state-")
        self.port = free_port()
        self.p = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", self.dir], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True,
                              text=True).stdout.strip()

    def pipe(self, commands):
        r = subprocess.run(["redis-cli", "-p", str(self.port), "--pipe"], input="".join(commands),
                           capture_output=True, text=True)
        if "errors: 0" not in r.stdout:
            raise RuntimeError("redis-cli --pipe: " + r.stdout[-500:])

    def used_memory(self):
        return int(re.search(r"used_memory:(\d+)", self.cli("INFO", "memory")).group(1))

    def usec_per_call(self):
        m = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+),usec_per_call=([0-9.]+)",
                      self.cli("INFO", "commandstats"))
        return float(m.group(3)) if m else float("nan")

    def close(self):
        self.p.kill()
        self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def before_script(ref, alg):
    def show(name):
        return subprocess.run(["git", "show", "%s:src/store/redis/lua/%s.lua" % (ref, name)], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
    s = "local ALGORITHM = '%s'\nlocal TAG = '%s'\n" % (alg, BEFORE_TAGS[alg]) + show("prelude")
    return s + "".join(show(p) for p in PARTS[alg])


def measure(r, script, args, key, keys, rounds):
    r.cli("FLUSHALL")
    sha = r.cli("SCRIPT", "LOAD", script)
    r.cli("CONFIG", "RESETSTAT")
    before = r.used_memory()
    r.pipe(resp("EVALSHA", sha, 1, key(i), *args) for i in range(keys))
    per_key = (r.used_memory() - before) / max(int(r.cli("DBSIZE")), 1)
    created = r.usec_per_call()
    r.cli("CONFIG", "RESETSTAT")
    hot = min(keys, 10000)
    r.pipe(resp("EVALSHA", sha, 1, key(i % hot), *args) for i in range(hot * rounds))
    return per_key, created, r.usec_per_call()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("load", help="build/release/bench/rk_redis_load")
    ap.add_argument("--before", default="main", help="the git ref of the baseline's scripts")
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    r = Redis()
    try:
        print("| algorithm | bytes/key before | after | usec/call, new key, before | after "
              "| usec/call, existing key, before | after |")
        print("|---|---|---|---|---|---|---|")
        for alg in ALGORITHMS:
            args = subprocess.run([a.load, "--print-args", alg, "--window-s", "60"], check=True, capture_output=True,
                                  text=True).stdout.split("\n")[:-1]
            after = subprocess.run([a.load, "--print-script", alg], check=True, capture_output=True,
                                   text=True).stdout
            # Keys as each side names the store key "rk:pop:<i>": a 16-hex digest tag before, "{}" after.
            old = measure(r, before_script(a.before, alg), args, lambda i: "rk:{%016x}:pop:%d" % (i * 2654435761, i),
                          a.keys, a.rounds)
            new = measure(r, after, args, lambda i: "rk:{}pop:%d" % i, a.keys, a.rounds)
            print("| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |" % (alg, old[0], new[0], old[1], new[1], old[2],
                                                                      new[2]))
            sys.stdout.flush()
        print("\nload average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())
    finally:
        r.close()


if __name__ == "__main__":
    main()
