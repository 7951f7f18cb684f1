"""What the Python benchmarks share: free ports, waiting for a server, running wrk and reading its report, and the
machine's guest halt polling, printed with figures that wait on other processes."""
import os
import re
import subprocess
import sys
import time
import urllib.request

# Free ports as the tests draw them (from under the kernel's ephemeral range, so that no outgoing connection takes
# one before its server binds it): one function for both.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "support"))
from harness import free_port  # noqa: E402,F401


def halt_polling():
    """On a virtual machine with Linux's cpuidle haltpoll driver: how long an idle vCPU polls before it halts. At 0 a
    process that sleeps halts its vCPU, and its wakeup costs a VM exit and entry: ~35 us on the VM of bench/RESULTS.md,
    where every round trip to Redis wakes two processes. Figures that wait on other processes (Redis, the servers)
    move with it; the kernel's default is 200000 (docs.kernel.org/virt/guest-halt-polling.html)."""
    try:
        with open("/sys/devices/system/cpu/cpuidle/current_driver") as f:
            driver = f.read().strip()
        if driver != "haltpoll":
            return "cpuidle driver %s" % driver
        with open("/sys/module/haltpoll/parameters/guest_halt_poll_ns") as f:
            return "guest halt polling %s ns (the kernel's default: 200000)" % f.read().strip()
    except OSError:
        return "no cpuidle driver"


def wait_http(url, seconds=10, context=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1, context=context).read()
            return
        except Exception:
            time.sleep(0.05)
    raise SystemExit("not answering: " + url)


def to_ms(value, unit):
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def wrk_command(url, seconds, connections, script):
    return ["wrk", "-t1", "-c%d" % connections, "-d%ds" % seconds, "--latency", "-s", script, url]


def parse_wrk(out):
    """wrk --latency's report: requests, requests/s, p50/p99/max latency in ms, non-2xx answers, socket errors."""
    lat = {pct: re.search(r"\s%s%%\s+([\d.]+)(us|ms|s)" % pct, out) for pct in ("50", "99")}
    mx = re.search(r"Latency\s+[\d.]+\w+\s+[\d.]+\w+\s+([\d.]+)(us|ms|s)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {"requests": int(re.search(r"(\d+) requests in", out).group(1)),
            "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50": to_ms(*lat["50"].groups()), "p99": to_ms(*lat["99"].groups()), "max": to_ms(*mx.groups()),
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": sum(int(x) for x in errors.groups()) if errors else 0}


def run_wrk(url, seconds, connections, script):
    out = subprocess.run(wrk_command(url, seconds, connections, script), capture_output=True, text=True,
                         check=True).stdout
    return parse_wrk(out)


LOAD_LINE = re.compile(r"decisions/s (\S+) p50_ms (\S+) p99_ms (\S+) failed (\d+) over_limit (\d+)(?: answered (\d+))?")


def parse_grpc_load(out):
    """The line rk_grpc_h2_load and rk_grpc_load print, as a dict; None if it is missing (the run broke off early).
    "answered" (the answers that passed the client's checks) is None from a client that does not print it."""
    m = LOAD_LINE.search(out)
    if not m:
        return None
    return {"rate": float(m.group(1)), "p50_ms": float(m.group(2)), "p99_ms": float(m.group(3)),
            "failed": int(m.group(4)), "over_limit": int(m.group(5)),
            "answered": int(m.group(6)) if m.group(6) is not None else None}
