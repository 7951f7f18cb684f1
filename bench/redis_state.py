"""bench/redis_state.py (also `bench/run redis_state`): the cost of each algorithm's state in Redis, this build's
layout against a baseline's (by default `main`, read with git), in one run on one fresh redis-server.

  bench/redis_state.py build/release/bench/rk_redis_load [--before main] [--keys 100000] [--rounds 10] [--passes 3]
                       [--only fixed_window,sliding_log]

For each algorithm and each side, the very script each side sends (this build's function library from
`rk_redis_load --print-library`, called by FCALL; the baseline's put together from its git tree as its scripts.cc
did: a library too if its prelude has begin(), else an EVALSHA script) is run from redis-cli --pipe with the ARGV
rk_redis_load gives (Redis's clock, cost 1, 100 an hour), on keys named as each side names them:
  bytes/key        INFO memory's used_memory before and after one decision on each of --keys keys, / DBSIZE
  new key          over those first decisions (a state created): INFO commandstats' usec_per_call of the call (wall
                   time inside Redis, which a loaded machine stretches), and Redis's main thread's CPU time per call
                   (INFO cpu: the script and the command's parsing and reply; less sensitive to other load)
  existing key     the same over --rounds decisions on each of 10,000 of those keys (a state read and written)
Prints a markdown table and the load average; the client's speed weighs nothing here.
"""
import argparse
import os
import re
import shutil
import statistics
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGORITHMS = ["earrrl", "gcra", "token_bucket", "leaky_bucket", "leaky_queue", "fixed_window", "sliding_log",
              "sliding_window"]
# The baseline's scripts (a tree with the layout 3 of issue 17, as scripts.cc's script_text puts them together):
# the tag byte, 0x30 + the algorithm's place in kAllAlgorithms (the order of ALGORITHMS), the packed layout's
# bounds (which a baseline without it ignores), then its prelude and the Lua files after it.
PARTS = {"earrrl": ["earrrl"], "gcra": ["gcra"], "leaky_queue": ["gcra"], "token_bucket": ["fluid"],
         "leaky_bucket": ["fluid"], "fixed_window": ["windows", "fixed_window"],
         "sliding_log": ["windows", "sliding_log"], "sliding_window": ["windows", "sliding_window"]}


def med(xs):
    return statistics.median(xs)


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

    def cpu_s(self):
        info = self.cli("INFO", "cpu")
        return sum(float(re.search(f + r":([0-9.]+)", info).group(1))
                   for f in ("used_cpu_user_main_thread", "used_cpu_sys_main_thread"))

    def usec_per_call(self):
        m = re.search(r"cmdstat_(?:evalsha|fcall):calls=(\d+),usec=(\d+),usec_per_call=([0-9.]+)",
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
    prelude = show("prelude")
    s = ("local ALGORITHM = '%s'\nlocal TAG = %d\nlocal PACK_FIELDS, PACK_VALUE = 64, 59\n"
         % (alg, 0x30 + ALGORITHMS.index(alg) + 1)) + prelude
    s += "".join(show(p) for p in PARTS[alg])
    if "local function begin(" not in prelude:
        return s  # before functions: an EVAL script
    name = "rk_before_" + alg
    return "#!lua name=%s\n%sredis.register_function('%s', decide)\n" % (name, s, name)


def call_of(r, script):
    """The command that runs `script` (a function library, or an EVAL script), loaded into r: FCALL or EVALSHA."""
    if script.startswith("#!lua name="):
        name = script.split("\n", 1)[0].split("=", 1)[1].strip()
        r.cli("FUNCTION", "LOAD", "REPLACE", script)
        return ("FCALL", name)
    return ("EVALSHA", r.cli("SCRIPT", "LOAD", script))


def measure(r, script, args, key, keys, rounds):
    """bytes/key, then (usec_per_call, Redis's CPU microseconds per call) for new keys, and for existing ones."""
    r.cli("FLUSHALL")
    call = call_of(r, script)
    r.cli("CONFIG", "RESETSTAT")
    before, cpu = r.used_memory(), r.cpu_s()
    r.pipe(resp(*call, 1, key(i), *args) for i in range(keys))
    created = (r.usec_per_call(), (r.cpu_s() - cpu) * 1e6 / keys)
    per_key = (r.used_memory() - before) / max(int(r.cli("DBSIZE")), 1)
    r.cli("CONFIG", "RESETSTAT")
    hot = min(keys, 10000)
    cpu = r.cpu_s()
    r.pipe(resp(*call, 1, key(i % hot), *args) for i in range(hot * rounds))
    return per_key, created, (r.usec_per_call(), (r.cpu_s() - cpu) * 1e6 / (hot * rounds))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("load", help="build/release/bench/rk_redis_load")
    ap.add_argument("--before", default="main", help="the git ref of the baseline's scripts")
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--only", default=",".join(ALGORITHMS))
    a = ap.parse_args()
    r = Redis()
    try:
        print("bytes/key: one decision on each of %d keys; usec/call: medians of %d passes, before and after "
              "alternated\n" % (a.keys, a.passes))
        print("| algorithm | bytes/key before | after | new key: usec_per_call before | after | CPU us/call before "
              "| after | existing key: usec_per_call before | after | CPU us/call before | after |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for alg in a.only.split(","):
            # An hour's window and 100 a window: every state outlives the measurement (a bucket's or GCRA's lives
            # for one interval, 36 s here), and the 10 rounds stay allowed but for gcra's and the buckets' burst.
            args = subprocess.run([a.load, "--print-args", alg, "--window-s", "3600", "--limit", "100"], check=True,
                                  capture_output=True, text=True).stdout.split("\n")[:-1]
            sides = {
                # Both sides name the store key "rk:pop:<i>" alike: a tag as wide as the real one (docs/redis.md).
                "before": (before_script(a.before, alg), lambda i: "rk:{00000000}pop:%d" % i),
                "after": (subprocess.run([a.load, "--print-library", alg], check=True, capture_output=True,
                                         text=True).stdout, lambda i: "rk:{00000000}pop:%d" % i),
            }
            got = {side: [] for side in sides}
            for k in range(a.passes):
                for side in (["before", "after"] if k % 2 == 0 else ["after", "before"]):
                    script, key = sides[side]
                    got[side].append(measure(r, script, args, key, a.keys if k == 0 else min(a.keys, 30000),
                                             a.rounds))
            b, n = got["before"], got["after"]
            cells = [b[0][0], n[0][0]]
            for which in (1, 2):
                for f in (0, 1):
                    cells += [med([x[which][f] for x in b]), med([x[which][f] for x in n])]
            print(("| %s | %.0f | %.0f" + " | %.2f" * 8 + " |") % (alg, *cells))
            sys.stdout.flush()
        print("\nload average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())
    finally:
        r.close()


if __name__ == "__main__":
    main()
