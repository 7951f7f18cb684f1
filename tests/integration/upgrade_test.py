#!/usr/bin/python3
"""A rolling upgrade of a fleet sharing one Redis, with two versions running at once (docs/upgrading.md): two
replicas of an earlier version of ratekeeper under steady HTTP load, then each in turn stopped and replaced by this
tree's binary on the same ports, behind a client that routes by /readyz (rolling_test.py's Balancer). A minor
version keeps the Redis key names and stored states, so old and new replicas share each limit: for every algorithm
the fleet admits at most its capacity in all, and when the roll is over Redis holds one key per limited key, not
one per version.

The earlier version is built from git, which takes minutes, so the test runs only when asked:
  RK_UPGRADE_FROM=previous   the commit tests/testdata/compat/previous_version names
  RK_UPGRADE_FROM=<commit>   any commit of this repository
  RK_UPGRADE_FROM=<path>     an earlier ratekeeper binary, already built
Unset, it exits 77, which ctest reports as skipped. A commit is exported (git archive) to BUILD/upgrade-from/<commit>
and its ratekeeper_app built there with the dev preset; a later run finds it built.
Run by ctest: upgrade_test.py BINARY PROTO_DIR SOURCE_DIR BUILD_DIR.
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from harness import wait_until  # noqa: E402  (tests/support: the shared helpers)
import grpc_test  # noqa: E402  (rolling_test's gRPC messages)
import rolling_test  # noqa: E402  (Replica, Balancer)
from redis_test import Redis, cli  # noqa: E402  (a redis-server on a free port)

SKIP = 77  # ctest's SKIP_RETURN_CODE for this test
OLD = NEW = None

# One rule per algorithm whose capacity does not refill within the test (a day's limits, no window edge to cross
# but at midnight UTC, which the sliding log and the buckets do not have): what the fleet admits of each is bounded
# by the capacity its first answer shows.
RULES = {
    "log": "{unit: day, requests_per_unit: 20, algorithm: sliding_log}",
    "gcra": "{unit: day, requests_per_unit: 20, algorithm: gcra, burst: 10}",
    "bucket": "{unit: day, requests_per_unit: 20, algorithm: token_bucket, capacity: 15}",
    "leaky": "{unit: day, requests_per_unit: 20, algorithm: leaky_bucket}",
}
RULES_YAML = "domain: upgrade\ndescriptors:\n" + "".join(
    "  - key: %s\n    rate_limit: %s\n" % (k, v) for k, v in RULES.items())


def resolve_old(source, build):
    """The earlier binary RK_UPGRADE_FROM asks for, built if need be; None if not asked."""
    asked = os.environ.get("RK_UPGRADE_FROM", "")
    if not asked:
        return None
    if os.path.isfile(asked) and os.access(asked, os.X_OK):
        return asked
    if asked == "previous":
        with open(os.path.join(source, "tests", "testdata", "compat", "previous_version")) as f:
            asked = next(line.split()[0] for line in f if line.strip() and not line.startswith("#"))
    commit = subprocess.run(["git", "-C", source, "rev-parse", "--verify", "--short=7", asked + "^{commit}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    tree = os.path.join(build, "upgrade-from", commit)
    binary = os.path.join(tree, "build", "dev", "ratekeeper")
    if not os.path.exists(os.path.join(tree, "CMakeLists.txt")):
        os.makedirs(tree, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", source, "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise AssertionError("git archive %s failed" % commit)
    began = time.monotonic()
    for command in (["cmake", "--preset", "dev"],
                    ["cmake", "--build", "build/dev", "-j2", "--target", "ratekeeper_app"]):
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError("building %s: %s failed:\n%s" % (commit, " ".join(command), done.stdout[-3000:]))
    print("upgrade_test: %s built in %.0f s (%s)" % (commit, time.monotonic() - began, binary), flush=True)
    return binary


def serve_help(binary):
    return subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout


def flag_names(binary):
    return {line.split()[0] for line in serve_help(binary).splitlines() if line.startswith("  --")}


class Replica(rolling_test.Replica):
    """rolling_test's replica, running whichever binary it is given, with the flags that binary knows (an earlier
    version may not have --drain and --shutdown-grace: it then stops at once on SIGTERM)."""

    def __init__(self, d, name, binary, redis_port):
        super().__init__(d, name, ["--redis", "redis://127.0.0.1:%d" % redis_port])
        with open(self.rules, "w") as f:
            f.write(RULES_YAML)
        self.binary = binary

    def start(self):
        drains = "--drain" in flag_names(self.binary)
        command = [self.binary, "serve", "--config", self.rules, "--http", "127.0.0.1:%d" % self.http_port,
                   "--admin", "127.0.0.1:%d" % self.admin_port, *self.extra[2:]]  # not rolling_test's state file
        if drains:
            command += ["--drain", self.drain, "--shutdown-grace", self.grace]
        self.drains = drains
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(self.ready, "replica %d (%s) to be ready" % (self.http_port, self.binary))


class Fleet(rolling_test.Balancer):
    """rolling_test's balancer over HTTP alone, each request for the next rule in turn; counts what the fleet
    admitted of each rule and the capacity each rule's first answer showed (its limit_remaining + 1)."""

    def __init__(self, replicas):
        super().__init__(replicas, http_threads=2, grpc_threads=0)
        self.turn = 0
        self.admitted_of = {k: 0 for k in RULES}
        self.capacity = {}

    def http_check(self, r, epoch, connections):
        with self.lock:
            self.turn += 1
            key = list(RULES)[self.turn % len(RULES)]
        c = connections.get((r, epoch))
        if c is None:
            c = connections[(r, epoch)] = http.client.HTTPConnection("127.0.0.1", r.http_port, timeout=10)
        body = json.dumps({"domain": "upgrade", "descriptors": [{"entries": [{"key": key, "value": "u"}]}]})
        c.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
        response = c.getresponse()
        answer = response.read()
        if response.status not in (200, 429):
            raise AssertionError("HTTP %d: %r" % (response.status, answer[:200]))
        status = json.loads(answer)["statuses"][0]
        with self.lock:
            if response.status == 200:
                self.admitted_of[key] += 1
                self.capacity[key] = max(self.capacity.get(key, 0), int(status.get("limit_remaining", 0)) + 1)
        return response.status == 200


class UpgradeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rk-upgrade-")
        self.redis = Redis()
        self.replicas = []

    def tearDown(self):
        for r in self.replicas:
            r.close()
        self.redis.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_every_flag_of_the_old_version_is_a_flag_of_the_new(self):
        gone = flag_names(OLD) - flag_names(NEW)
        self.assertEqual(gone, set(), "flags of %s that %s does not have" % (OLD, NEW))

    def test_old_and_new_replicas_on_one_redis_share_every_limit_through_a_rolling_upgrade(self):
        a = Replica(self.dir, "a", OLD, self.redis.port)
        b = Replica(self.dir, "b", OLD, self.redis.port)
        self.replicas += [a, b]
        a.start()
        b.start()
        both_old_drain = all(r.drains for r in (a, b))  # of the old binary: asked before the replicas are replaced
        with Fleet([a, b]) as fleet:
            wait_until(lambda: all(fleet.ready.values()) and sum(fleet.admitted.values()) > 4, "load on both")
            for r in (a, b):
                code, _ = r.stop()
                self.assertEqual(code, 0, r.output())
                r.binary = NEW
                r.start()
                wait_until(lambda: fleet.ready[r], "the balancer to see replica %d again" % r.http_port)
                time.sleep(1.0)  # both versions (then both new) under load, each deciding on the shared keys
        for key, admitted in fleet.admitted_of.items():
            self.assertIn(key, fleet.capacity, "rule %s admitted nothing" % key)
            self.assertLessEqual(admitted, fleet.capacity[key], "rule %s: the fleet admitted past its capacity "
                                 "(old and new replicas keep it apart in Redis?)" % key)
        self.assertGreater(fleet.refused, 0, "the load went past the limits")
        keys = cli(self.redis.port, "--scan", "--pattern", "rk:*").split()
        self.assertEqual(len(keys), len(RULES), "one Redis key per limited key, whichever version wrote it: %s" % keys)
        if both_old_drain:
            self.assertEqual(fleet.failures, [], "%d requests failed" % len(fleet.failures))
        print("upgrade_test: admitted %s of capacities %s; %d refused, %d failed (old replicas %s --drain)"
              % (fleet.admitted_of, fleet.capacity, fleet.refused, len(fleet.failures),
                 "with" if both_old_drain else "without"), flush=True)


def main():
    global OLD, NEW
    NEW, proto, source, build = sys.argv[1:5]
    OLD = resolve_old(source, build)
    if OLD is None:
        print("upgrade_test: skipped; RK_UPGRADE_FROM=previous (or a commit, or an earlier binary) runs it")
        sys.exit(SKIP)
    grpc_test.PROTO_DIR = proto
    rolling_test.BINARY = NEW
    del sys.argv[1:5]
    unittest.main()


if __name__ == "__main__":
    main()
