#!/usr/bin/python3
"""The image and the Kubernetes manifests, run as docs/deploy.md says, in podman (Debian's package).

  deploy_test.py image|container|kubernetes --source SRC --build BUILD_DIR

  image       scripts/image, as docs/deploy.md's marked block runs it, for both images (left as they are when
              built from the same binary and script: --if-changed), then the image's contents and configuration:
              only the binary, its libraries and their licences, user 10001, /bin/ratelimit a link to ratekeeper.
              The ctest fixture the other two need.
  container   docs/deploy.md's `podman run` as written (its published ports moved to free loopback ports, its name
              made this test's): /healthz, /v1/check and Envoy's gRPC API (grpcio, as tests/integration/grpc_test.py)
              answer from the container, with a read-only root.
  kubernetes  examples/kubernetes/*.yaml with `podman kube play`: both replicas ready and answering /v1/check and
              gRPC, the rules from the ConfigMap; a limit of 10 per 90 s (examples/rules.yaml's /login) admits 10
              from each replica alone, and 10 in all through Redis. The manifests are checked for what docs/deploy.md
              says of them (probes, non-root, read-only root, resources, the ConfigMap's rules examples/rules.yaml).

podman here: containers start only with runc and no default rlimits (these machines refuse podman's), which the
containers.conf this test writes sets (CONTAINERS_CONF). Its storage is the build tree's own (tests/deploy/storage,
CONTAINERS_STORAGE_CONF), so the image built once serves every test of a run, and the next run too if the binary
did not change. podman 4.3's `kube play` publishes every containerPort on the host, which Kubernetes does not (two
replicas would collide there): the test removes the ports and reaches each pod at its address on podman's bridge.
It ignores Services and PodDisruptionBudgets (checked here as YAML), and has no cluster DNS: the Redis Service's name
in --redis is replaced by the Redis pod's address.
"""
import argparse
import hashlib
import http.client
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import free_port, wait_until  # noqa: E402

SRC = BUILD = VERSION = None
UID = 10001
MARK = "<!-- docs-test: by tests/deploy/deploy_test.py -->"


def fail(message):
    raise AssertionError(message)


def run(*cmd, check=True, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail("%s: exit %d\n%s%s" % (shlex.join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def podman(*args, **kw):
    return run("podman", *args, **kw)


def setup_podman():
    """containers.conf and storage.conf of this build tree, named by the environment for podman and scripts/image.
    The run directory is per build tree too, under the temporary folder (podman keeps per-boot state there)."""
    d = os.path.join(BUILD, "tests", "deploy")
    os.makedirs(d, exist_ok=True)
    run_dir = os.path.join(tempfile.gettempdir(), "rk-podman-" + hashlib.sha1(BUILD.encode()).hexdigest()[:12])
    conf = os.path.join(d, "containers.conf")
    with open(conf, "w") as f:
        f.write('[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\ntmp_dir = "%s/libpod"\n'
                'lock_type = "file"\n' % run_dir)
    storage = os.path.join(d, "storage.conf")
    with open(storage, "w") as f:
        f.write('[storage]\ndriver = "overlay"\ngraphroot = "%s/storage"\nrunroot = "%s/storage"\n' % (d, run_dir))
    os.environ["CONTAINERS_CONF"] = conf
    os.environ["CONTAINERS_STORAGE_CONF"] = storage


def marked_blocks(doc):
    """The fenced blocks of a doc that follow this test's marker, as lists of lines."""
    blocks, lines = [], open(os.path.join(SRC, doc)).read().splitlines()
    for i, line in enumerate(lines):
        if line == MARK and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            end = lines.index("```", i + 2)
            blocks.append(lines[i + 2:end])
    if not blocks:
        fail("%s has no block marked %s" % (doc, MARK))
    return blocks


def commands(doc, start):
    """The commands of the marked blocks of `doc` that start with `start`, continuation lines joined, comments
    dropped, each split as the shell would."""
    found = []
    for block in marked_blocks(doc):
        text = "\n".join(block).replace("\\\n", " ")
        for line in text.splitlines():
            if line.startswith(start):
                found.append(shlex.split(line, comments=True))
    if not found:
        fail("%s: no marked block runs %s" % (doc, start))
    return found


# ---- image

def image_test():
    for cmd in commands("docs/deploy.md", "scripts/image"):
        t0 = time.monotonic()
        out = run(os.path.join(SRC, cmd[0]), *cmd[1:], "--build", BUILD, "--if-changed", timeout=600).stdout
        print("%s (%.0f s)" % (out.strip(), time.monotonic() - t0))
        if not re.search(r"localhost/ratekeeper(-redis)?:%s: (up to date|[0-9.]+ MB)" % re.escape(VERSION), out):
            fail("scripts/image printed: " + out)
    tag = "localhost/ratekeeper:" + VERSION
    inspect = json.loads(podman("image", "inspect", tag).stdout)[0]
    config = inspect["Config"]
    # The size docs/deploy.md gives, within 10% of this build's (a dev build's; the binary varies a little).
    with open(os.path.join(SRC, "docs/deploy.md")) as f:
        m = re.search(r"Its size\s+is printed: ([0-9.]+) MB", f.read())
    if not m or abs(float(m.group(1)) * 1e6 - inspect["Size"]) > 0.1 * inspect["Size"]:
        fail("docs/deploy.md gives the image's size as %s MB; scripts/image built %.1f MB"
             % (m and m.group(1), inspect["Size"] / 1e6))
    if config.get("User") != "%d:%d" % (UID, UID) or config.get("Entrypoint") != ["/usr/bin/ratekeeper"]:
        fail("the image's user and entrypoint: %s %s" % (config.get("User"), config.get("Entrypoint")))
    files = podman("run", "--rm", "--entrypoint", "/usr/bin/ratekeeper", tag, "version").stdout
    if VERSION not in files:
        fail("ratekeeper version in the image printed: " + files)
    # The contents, as the image's only layer holds them: nothing but the binary, the loader, libraries, their
    # licences, gRPC's roots and the files scripts/image writes.
    root = podman("image", "mount", tag).stdout.strip()
    try:
        if os.readlink(os.path.join(root, "bin/ratelimit")) != "/usr/bin/ratekeeper":
            fail("/bin/ratelimit is not a link to /usr/bin/ratekeeper")
        if os.path.lexists(os.path.join(root, "bin/sh")) or os.path.lexists(os.path.join(root, "usr/bin/apt")):
            fail("the image has a shell or a package manager")
        allowed = re.compile(r"^/(bin/ratelimit|usr/bin/ratekeeper|lib64/ld-linux-x86-64\.so\.2|etc/(passwd|group|"
                             r"ld\.so\.cache)|(usr/)?lib/x86_64-linux-gnu/[^/]+\.so[.0-9]*|usr/share/doc/[^/]+/"
                             r"copyright|usr/share/grpc/roots\.pem)$")
        for d, _, names in os.walk(root):
            for name in names:
                path = os.path.join(d, name)[len(root):]
                if not allowed.match(path):
                    fail("the image holds %s, which the service does not need" % path)
        with open(os.path.join(root, "etc/passwd")) as f:
            if "ratekeeper:x:%d:%d:" % (UID, UID) not in f.read():
                fail("/etc/passwd has no user ratekeeper")
    finally:
        podman("image", "unmount", tag)


# ---- gRPC and HTTP against an address

_pb = None
_pb_dir = tempfile.mkdtemp(prefix="rk-deploy-pb2-")


def grpc_modules():
    """Envoy's rate-limit messages and gRPC health, generated as tests/integration/grpc_test.py does."""
    global _pb
    if _pb is None:
        import grpc_test
        grpc_test.PROTO_DIR = os.path.join(SRC, "proto")
        _pb = grpc_test.generate(_pb_dir)
    return _pb


def grpc_decision(address, domain, entries):
    import grpc
    rls, health = grpc_modules()
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=20)
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=health.HealthCheckRequest.SerializeToString,
                                    response_deserializer=health.HealthCheckResponse.FromString)
        if check(health.HealthCheckRequest(service=""), timeout=10).status != health.HealthCheckResponse.SERVING:
            fail("gRPC health at %s: not SERVING" % address)
        should = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                     request_serializer=rls.RateLimitRequest.SerializeToString,
                                     response_deserializer=rls.RateLimitResponse.FromString)
        r = rls.RateLimitRequest(domain=domain)
        d = r.descriptors.add()
        for k, v in entries:
            d.entries.add(key=k, value=v)
        resp = should(r, timeout=10)
        return rls.RateLimitResponse.Code.Name(resp.overall_code), resp.statuses[0].current_limit.requests_per_unit


def http_request(host, port, method, path, body=None):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def check(host, port, entries):
    body = json.dumps({"domain": "edge", "descriptors": [{"entries": [{"key": k, "value": v} for k, v in entries]}]})
    status, text = http_request(host, port, "POST", "/v1/check", body)
    if status not in (200, 429):
        fail("POST /v1/check at %s:%d: %d %s" % (host, port, status, text))
    return json.loads(text)


def serves(host, http_port, grpc_port, what):
    """`what` answers /healthz, /readyz, /v1/check and gRPC with examples/rules.yaml's limits."""
    wait_until(lambda: http_request(host, http_port, "GET", "/readyz")[0] == 200, what + " to be ready", seconds=60)
    status, text = http_request(host, http_port, "GET", "/healthz")
    if status != 200:
        fail("%s: /healthz %d %s" % (what, status, text))
    answer = check(host, http_port, [("api_key", "deploy-test")])
    limit = answer["statuses"][0]["current_limit"]
    if answer["overall_code"] != "OK" or (limit["name"], limit["requests_per_unit"]) != ("per_api_key", 100):
        fail("%s: /v1/check answered %s" % (what, answer))
    code, per_unit = grpc_decision("%s:%d" % (host, grpc_port), "edge", [("api_key", "partner-deploy-test")])
    if (code, per_unit) != ("OK", 1000):
        fail("%s: gRPC ShouldRateLimit answered %s, %d" % (what, code, per_unit))


# ---- container

def container_test():
    runs = commands("docs/deploy.md", "podman run")
    if len(runs) != 1:
        fail("docs/deploy.md: %d marked `podman run` commands, expected one" % len(runs))
    cmd, ports = runs[0], {8080: free_port(), 8081: free_port()}
    name = "rk-deploy-test-%d" % os.getpid()
    for i, arg in enumerate(cmd):
        m = re.fullmatch(r"(\d+):(\d+)", arg)
        if cmd[i - 1] == "-p" and m and int(m.group(2)) in ports:
            cmd[i] = "127.0.0.1:%d:%s" % (ports[int(m.group(2))], m.group(2))
        elif cmd[i - 1] == "--name":
            cmd[i] = name
        elif arg.startswith("./"):
            cmd[i] = arg.replace("./", SRC + "/", 1)
    if "--name" not in cmd:
        fail("docs/deploy.md's podman run gives the container no name")
    t0 = time.monotonic()
    run(*cmd)
    try:
        serves("127.0.0.1", ports[8080], ports[8081], "the container")
        inspect = json.loads(podman("container", "inspect", name).stdout)[0]
        if not inspect["HostConfig"]["ReadonlyRootfs"] or inspect["Config"]["User"] != "%d:%d" % (UID, UID):
            fail("the container's root is writable or its user is not %d" % UID)
        print("podman run: ready and answering in %.1f s" % (time.monotonic() - t0))
    except BaseException:
        print(podman("logs", name, check=False).stderr, file=sys.stderr)
        raise
    finally:
        podman("rm", "--force", "--time", "10", name, check=False)


# ---- kubernetes

def manifest_checks(path, docs):
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for kind in ("ConfigMap", "Deployment", "Service", "PodDisruptionBudget"):
        if (kind, "ratekeeper" if kind != "ConfigMap" else "ratekeeper-rules") not in kinds:
            fail("%s has no %s of ratekeeper" % (path, kind))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    with open(os.path.join(SRC, "examples/rules.yaml")) as f:
        if cm["data"]["rules.yaml"] != f.read():
            fail("%s: the ConfigMap's rules.yaml is not examples/rules.yaml" % path)
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        spec = dep["spec"]["template"]["spec"]
        sc = spec["securityContext"]
        if not sc.get("runAsNonRoot") or sc.get("runAsUser") != UID:
            fail("%s: %s does not run as user %d" % (path, dep["metadata"]["name"], UID))
        for c in spec["containers"]:
            if not c["securityContext"].get("readOnlyRootFilesystem"):
                fail("%s: %s's root is not read-only" % (path, c["name"]))
            if not c.get("resources", {}).get("requests", {}).get("memory"):
                fail("%s: %s requests no memory" % (path, c["name"]))
            if not c["image"].endswith(":" + VERSION):
                fail("%s: %s's image is not of version %s (CMakeLists.txt's)" % (path, c["image"], VERSION))
            if c["name"] == "ratekeeper":
                if dep["spec"]["replicas"] != 2:
                    fail("%s: ratekeeper's replicas are not 2" % path)
                probes = (c["readinessProbe"]["httpGet"], c["livenessProbe"]["httpGet"])
                if [(p["path"], p["port"]) for p in probes] != [("/readyz", 8080), ("/healthz", 8080)]:
                    fail("%s: the probes are not the public listener's /readyz and /healthz" % path)
                if "0.0.0.0:8080" not in c["args"] or "0.0.0.0:8081" not in c["args"]:
                    fail("%s: --http and --grpc are not on every address" % path)


def for_podman(docs):
    """The objects podman plays, without the containerPorts it would publish on the host."""
    out = []
    for d in docs:
        if d["kind"] in ("Deployment", "ConfigMap"):
            d = json.loads(json.dumps(d))
            for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                c.pop("ports", None)
            out.append(d)
    return out


def pod_addresses(deployment):
    pods = json.loads(podman("pod", "ps", "--format", "json", "--filter", "name=%s-pod-" % deployment).stdout)
    addresses = []
    for pod in pods:
        infra = json.loads(podman("pod", "inspect", pod["Id"]).stdout)["InfraContainerID"]
        net = json.loads(podman("container", "inspect", infra).stdout)[0]["NetworkSettings"]
        addresses.append(net.get("IPAddress") or next(iter(net["Networks"].values()))["IPAddress"])
    return addresses


def play(docs, tmp, name):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
    r = podman("kube", "play", path, check=False)
    # No systemd here to run podman's healthcheck timers: logged, not fatal.
    if r.returncode != 0:
        fail("podman kube play %s: %s%s" % (name, r.stdout, r.stderr))
    return path


def admitted(addresses, n):
    """n requests of /login, spread evenly over the replicas: how many each admitted."""
    counts = dict.fromkeys(addresses, 0)
    for i in range(n):
        a = addresses[i % len(addresses)]
        counts[a] += check(a, 8080, [("path", "/login")])["overall_code"] == "OK"
    return counts


def kubernetes_test():
    manifests = (("ratekeeper.yaml", False), ("ratekeeper-redis.yaml", True))
    for cmd in commands("docs/deploy.md", "kubectl apply"):
        if cmd[-1] not in ["examples/kubernetes/" + m for m, _ in manifests]:
            fail("docs/deploy.md applies %s, which this test does not play" % cmd[-1])
    played = []
    tmp = tempfile.mkdtemp(prefix="rk-deploy-kube-")
    try:
        for manifest, shared in manifests:
            t0 = time.monotonic()
            path = os.path.join("examples/kubernetes", manifest)
            with open(os.path.join(SRC, path)) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            manifest_checks(path, docs)
            docs = for_podman(docs)
            if shared:
                redis = [d for d in docs if d["metadata"]["name"] == "redis"]
                played.append(play(redis, tmp, "redis.yaml"))
                address = pod_addresses("redis")[0]
                for d in docs:
                    for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                        c["args"] = [a.replace("redis://redis:", "redis://%s:" % address) for a in c["args"]]
                docs = [d for d in docs if d not in redis]
            played.append(play(docs, tmp, manifest))
            addresses = pod_addresses("ratekeeper")
            if len(addresses) != 2:
                fail("%s: %d ratekeeper pods, expected 2" % (path, len(addresses)))
            for a in addresses:
                serves(a, 8080, 8081, "%s's replica at %s" % (manifest, a))
            counts = admitted(addresses, 40)
            expected = 10 if shared else 20  # /login: 10 in any 90 s, exactly
            if sum(counts.values()) != expected or not all(counts.values()):
                fail("%s: 40 requests over both replicas admitted %s, expected %d in all, some by each"
                     % (manifest, counts, expected))
            print("%s: 2 replicas ready and answering, /login admitted %s (%d in all) in %.1f s"
                  % (manifest, counts, expected, time.monotonic() - t0))
            podman("kube", "down", played.pop(), timeout=120)
            if shared:
                podman("kube", "down", played.pop(), timeout=120)
    except BaseException:
        for name in ("ratekeeper", "redis"):
            for c in json.loads(podman("ps", "-a", "--format", "json", "--filter", "name=%s-pod-" % name,
                                       check=False).stdout or "[]"):
                print("--- %s\n%s" % (c["Names"][0], podman("logs", c["Id"], check=False).stderr), file=sys.stderr)
        raise
    finally:
        for path in reversed(played):
            podman("kube", "down", path, check=False, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    global SRC, BUILD, VERSION
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["image", "container", "kubernetes"])
    p.add_argument("--source", required=True)
    p.add_argument("--build", required=True)
    args = p.parse_args()
    SRC, BUILD = os.path.abspath(args.source), os.path.abspath(args.build)
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        VERSION = re.search(r"project\(ratekeeper VERSION ([0-9.]+)", f.read()).group(1)
    for tool in ("podman", "mmdebstrap", "runc"):
        if not shutil.which(tool):
            fail("%s is missing (scripts/deps installs it)" % tool)
    setup_podman()
    t0 = time.monotonic()
    try:
        {"image": image_test, "container": container_test, "kubernetes": kubernetes_test}[args.what]()
    finally:
        shutil.rmtree(_pb_dir, ignore_errors=True)
    print("deploy %s: passed in %.1f s" % (args.what, time.monotonic() - t0))


if __name__ == "__main__":
    main()
