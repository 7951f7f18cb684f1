"""tests/support/harness.py: what the integration tests share — free ports, bounded polling of real processes,
stopping them, and `ratekeeper serve` on loopback with its rules file and log in a directory of its own.

The tests import it from tests/support/ (`from harness import ...`, with that directory on sys.path); each test's
main passes the binary it was given to the servers it starts, so nothing here is global but the helpers themselves.
"""
import http.client
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def _ephemeral_low():
    """The lowest port the kernel hands out as an outgoing connection's source port (ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(offset=0):
    """A port free on 127.0.0.1 now, drawn at random from under the kernel's ephemeral range: a port the kernel
    handed out (bind to 0) can be handed out again, as another process's outgoing connection's source port, before
    the server that is to listen on it binds it ("Address already in use"); a port under that range never is. With
    `offset`, port + offset is under that range and free now too: a Redis Cluster node's bus port is its port (its
    TLS port, with --tls-cluster) + 10000."""
    top = _ephemeral_low() - 1 - offset
    rng = random.SystemRandom()
    while True:
        port = rng.randint(10000, top)
        if all(_bindable(p) for p in {port, port + offset}):
            return port


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_until(condition, what, seconds=15.0, retry_on=(OSError,), interval=0.02):
    """Polls a condition on a real process (never a clock under test), bounded: the exceptions in `retry_on` mean
    "not yet"; after `seconds`, an AssertionError naming `what`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except retry_on:
            pass
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)


def stop(proc, sig=signal.SIGTERM, seconds=15):
    """Stops a process with `sig`, killing it if it is still running after `seconds`. Returns whether it stopped on
    the signal (False: it had to be killed)."""
    if proc.poll() is not None:
        return True
    proc.send_signal(sig)
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


def prometheus_series(text, name):
    """{frozenset of label items: value} of one metric in a Prometheus exposition, empty labels dropped."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^%s(?:\{(.*)\})? (\S+)$" % re.escape(name), line)
        if m:
            labels = frozenset((k, v) for k, v in re.findall(r'(\w+)="([^"]*)"', m.group(1) or "") if v)
            out[labels] = float(m.group(2))
    return out


class Serve:
    """`ratekeeper serve --config DIR/rules.yaml --http 127.0.0.1:P --admin ADDRESS:Q EXTRA...`, its output in a log
    in DIR (a new temporary directory unless `d` is given: then the caller owns it); with `config`, that file or
    directory of rules instead; with `open_files`, its RLIMIT_NOFILE (soft and hard). Ready once wait_ready()
    returns. It stops at once on SIGTERM (--drain 0s) unless `extra` gives --drain."""

    def __init__(self, binary, rules_text, extra=(), d=None, admin_address="127.0.0.1", config=None,
                 open_files=None):
        self.own_dir = d is None
        self.dir = tempfile.mkdtemp(prefix="rk-serve-") if d is None else d
        self.rules = config or os.path.join(self.dir, "rules.yaml")
        if config is None:
            self.write(rules_text)
        self.http_port, self.admin_port = free_port(), free_port()
        self.log = open(os.path.join(self.dir, "log-%d" % self.http_port), "w+")
        self.proc = subprocess.Popen(
            [binary, "serve", "--config", self.rules, "--http", "127.0.0.1:%d" % self.http_port,
             "--admin", "%s:%d" % (admin_address, self.admin_port), *self.more_args(),
             *([] if "--drain" in extra else ["--drain", "0s"]), *extra],
            stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=None if open_files is None else lambda: resource.setrlimit(
                resource.RLIMIT_NOFILE, (open_files, open_files)))
        try:
            self.wait_ready()
        except AssertionError:
            self.stop()  # not left running when it never became ready
            raise

    def more_args(self):
        """Flags a subclass adds before `extra` (ports it chose, say)."""
        return []

    def wait_ready(self):
        wait_until(lambda: self.request("GET", "/readyz", admin=True)[0] == 200, "ratekeeper to be ready")

    def write(self, text):
        """Replaces the rules file at once (a reload never sees half of it)."""
        tmp = self.rules + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.rules)

    def connection(self, admin=False):
        return http.client.HTTPConnection("127.0.0.1", self.admin_port if admin else self.http_port, timeout=10)

    def request(self, method, path, body=None, headers=None, admin=False, conn=None):
        """(status, headers as a dict, body). With a body, or an admin POST (the admin listener takes JSON only),
        sent as application/json unless `headers` are given."""
        if headers is None and (body is not None or (admin and method == "POST")):
            headers = {"Content-Type": "application/json"}
        own = conn is None
        conn = conn or self.connection(admin)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            if own:
                conn.close()

    def get(self, path, admin=False):
        return self.request("GET", path, admin=admin)

    def metric(self, name):
        """The sum of a Prometheus metric's samples (every label set) on /metrics."""
        text = self.request("GET", "/metrics", admin=True)[2].decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name + " ") or line.startswith(name + "{"))

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, must_stop=False):
        """SIGTERM (killed after 15 s; with `must_stop`, that fails the test, naming the log)."""
        stopped = stop(self.proc)
        out = "" if stopped else self.output()
        self.log.close()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if must_stop and not stopped:
            raise AssertionError("ratekeeper did not stop on SIGTERM:\n" + out)
