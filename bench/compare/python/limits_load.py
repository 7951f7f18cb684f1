#!/usr/bin/python3
"""bench/compare's Python peer: the `limits` package (Debian python3-limits, redis-py underneath) on Redis.

  limits_load.py load PORT STRATEGY LIMIT PROCESSES KEYS SECONDS
      PROCESSES processes (limits' Redis client is synchronous: one call in flight per process), each calling
      limiter.hit(LIMIT, key) over KEYS random keys for SECONDS after a 0.5 s warm-up; prints
      "decisions_per_s=... p99_us=... allowed=..." for all processes together.
  limits_load.py populate PORT STRATEGY LIMIT KEYS
      one hit on each of KEYS distinct keys (for used_memory per key).
  limits_load.py trace PORT STRATEGY LIMIT < offsets
      one key, one hit at each offset (seconds from the start, one a line) in real time; prints
      "<seconds since start when sent> <0|1>" a line.
STRATEGY is moving_window or fixed_window; LIMIT a limits string ("1000/second").
"""
import multiprocessing
import random
import sys
import time

import limits
from limits import storage, strategies

STRATEGIES = {"moving_window": strategies.MovingWindowRateLimiter,
              "fixed_window": strategies.FixedWindowRateLimiter}


_storages = []  # the strategies hold their storage by a weak reference only


def limiter(port, strategy):
    st = storage.storage_from_string("redis://127.0.0.1:%d" % port)
    _storages.append(st)
    return STRATEGIES[strategy](st)


def worker(port, strategy, limit, keys, seconds, seed, out):
    lim = limiter(port, strategy)
    item = limits.parse(limit)
    rnd = random.Random(seed)
    names = ["k%d" % i for i in range(keys)]
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # warm up: connection, script load
        lim.hit(item, rnd.choice(names))
    lat = []
    done = allowed = 0
    start = time.monotonic()
    end = start + seconds
    now = start
    while now < end:
        ok = lim.hit(item, names[rnd.randrange(keys)])
        t = time.monotonic()
        lat.append(t - now)
        now = t
        done += 1
        allowed += ok
    out.put((done, allowed, now - start, lat))


def load(port, strategy, limit, processes, keys, seconds):
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=worker, args=(port, strategy, limit, keys, seconds, i, q))
          for i in range(processes)]
    for p in ps:
        p.start()
    res = [q.get(timeout=seconds + 60) for _ in ps]
    for p in ps:
        p.join()
    done = sum(r[0] for r in res)
    allowed = sum(r[1] for r in res)
    elapsed = max(r[2] for r in res)
    lat = sorted(x for r in res for x in r[3])
    print("decisions_per_s=%.0f p99_us=%.1f allowed=%.4f" % (done / elapsed, lat[len(lat) * 99 // 100] * 1e6,
                                                              allowed / max(done, 1)))


def populate(port, strategy, limit, keys):
    lim = limiter(port, strategy)
    item = limits.parse(limit)
    for i in range(keys):
        lim.hit(item, "m%d" % i)


def trace(port, strategy, limit):
    lim = limiter(port, strategy)
    item = limits.parse(limit)
    offsets = [float(x) for x in sys.stdin.read().split()]
    lim.hit(item, "warmup")
    start = time.monotonic()
    out = []
    for off in offsets:
        while True:
            d = start + off - time.monotonic()
            if d <= 0:
                break
            time.sleep(d)
        t = time.monotonic() - start
        out.append("%.6f %d" % (t, lim.hit(item, "trace")))
    print("\n".join(out))


def main():
    cmd, port, strategy, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if cmd == "load":
        load(port, strategy, limit, int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
    elif cmd == "populate":
        populate(port, strategy, limit, int(sys.argv[5]))
    elif cmd == "trace":
        trace(port, strategy, limit)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
