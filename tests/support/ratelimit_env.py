"""tests/support/ratelimit_env.py: what the tests of the binary invoked as `ratelimit` share — Envoy Gateway's
environment (tests/testdata/envoy_gateway/ratelimit.env, the variables its rate-limit deployment sets), the link
itself, processes with their logs, and a redis-server that, like Envoy Gateway's Redis with REDIS_TLS, speaks TLS only
and asks for a client certificate and the password.

Used by tests/integration/upstream_env_test.py and tests/integration/envoy_gateway_test.py.
"""
import os
import shutil
import subprocess

from harness import free_port, stop

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "envoy_gateway",
                       "ratelimit.env")


def fixture():
    """Envoy Gateway's variables, NAME -> VALUE, as its deployment sets them."""
    env = {}
    with open(FIXTURE) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, value = line.split("=", 1)
                env[name] = value
    return env


def link(binary, d):
    """`d`/bin/ratelimit, a symbolic link to `binary`, as an image's /bin/ratelimit."""
    path = os.path.join(d, "bin", "ratelimit")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.abspath(binary), path)
    return path


def serve_flags(binary):
    """The flags this build's serve has (a variable whose flag another part of the project adds may be missing)."""
    text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, check=True).stdout
    return {w for w in text.split() if w.startswith("--")}


class Process:
    """A process with its log in `d`, stopped by pid."""

    def __init__(self, d, argv, env=None):
        self.log_path = os.path.join(d, "log-%d" % free_port())
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        stopped = stop(self.proc)
        self.log.close()
        return stopped


def tls_redis(d, cert, password):
    """A redis-server on a free loopback port, TLS only, asking for a client certificate from ca.crt and `password`:
    (the Process, its port). `cert(name)` is the path of a file of tests/support/make_certs.sh's."""
    port = free_port()
    server = Process(d, [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", "0",
                         "--tls-port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                         "--dir", d, "--tls-cert-file", cert("server.crt"), "--tls-key-file", cert("server.key"),
                         "--tls-ca-cert-file", cert("ca.crt"), "--tls-auth-clients", "yes",
                         "--requirepass", password])
    return server, port
