#!/usr/bin/python3
"""Traces and logs from the real `ratekeeper serve`: a span per decision sent over OTLP to receivers built here from
our .proto files (protoc generates Python's classes at test time), over HTTP/protobuf and over gRPC, each span
decoded and its ids, attributes and sampling checked; a collector that is down or silent never delays a decision;
--log-format text and the access log. Run by ctest: tracing_test.py BINARY PROTO_DIR.
"""
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import Serve, free_port, wait_until  # noqa: E402

BINARY = PROTO_DIR = None
otlp = rls = None  # the generated modules

RULES = """
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2, name: per_user}
"""
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def generate(out):
    protos = ["opentelemetry/proto/common/v1/common.proto", "opentelemetry/proto/resource/v1/resource.proto",
              "opentelemetry/proto/trace/v1/trace.proto",
              "opentelemetry/proto/collector/trace/v1/trace_service.proto",
              "envoy/type/v3/ratelimit_unit.proto", "envoy/config/core/v3/base.proto",
              "envoy/extensions/common/ratelimit/v3/ratelimit.proto", "envoy/service/ratelimit/v3/rls.proto"]
    subprocess.run(["protoc", "-I", PROTO_DIR, "-I", "/usr/include", "--python_out", out, *protos], check=True)
    sys.path.insert(0, out)
    return (importlib.import_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2"),
            importlib.import_module("envoy.service.ratelimit.v3.rls_pb2"))


class Received:
    """Every span a receiver decoded, with its resource's attributes and the export's headers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.spans, self.resources, self.headers = [], [], []

    def take(self, body, headers):
        request = otlp.ExportTraceServiceRequest.FromString(body)
        with self.lock:
            self.headers.append(headers)
            for rs in request.resource_spans:
                self.resources.append({a.key: a.value.string_value for a in rs.resource.attributes})
                for ss in rs.scope_spans:
                    self.spans.extend(ss.spans)

    def count(self):
        with self.lock:
            return len(self.spans)


class HttpReceiver:
    def __init__(self):
        self.received = received = Received()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                ok = self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
                if ok:
                    received.take(body, {k.lower(): v for k, v in self.headers.items()})
                out = otlp.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class GrpcReceiver:
    def __init__(self):
        self.received = received = Received()

        def export(body, context):
            received.take(body, dict(context.invocation_metadata()))
            return otlp.ExportTraceServiceResponse().SerializeToString()

        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(export)})
        from concurrent import futures
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def close(self):
        self.server.stop(0)


def attrs(span):
    out = {}
    for a in span.attributes:
        v = a.value
        kind = v.WhichOneof("value")
        out[a.key] = [x.string_value for x in v.array_value.values] if kind == "array_value" else getattr(v, kind)
    return out


def check(serve, user, headers=None):
    h = {"Content-Type": "application/json", **(headers or {})}
    body = json.dumps({"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": user}]}]})
    return serve.request("POST", "/v1/check", body=body, headers=h)[0]


class HttpTracing(unittest.TestCase):
    def setUp(self):
        self.receiver = HttpReceiver()
        self.serve = Serve(BINARY, RULES, ["--otlp-endpoint", "http://127.0.0.1:%d" % self.receiver.port,
                                           "--otlp-headers", "x-api-key=k1", "--service-name", "rk-test",
                                           "--trace-sample-rate", "1"])

    def tearDown(self):
        self.serve.stop(must_stop=True)
        self.receiver.close()

    def test_each_decision_is_a_span_child_of_the_callers(self):
        self.assertEqual(check(self.serve, "a", {"traceparent": "00-%s-%s-01" % (TRACE, SPAN),
                                                 "tracestate": "congo=t61rcWkgMzE"}), 200)
        check(self.serve, "b")
        self.assertEqual(check(self.serve, "b"), 200)
        self.assertEqual(check(self.serve, "b"), 429)
        self.assertEqual(check(self.serve, "c", {"traceparent": "00-%s-%s-00" % (TRACE, SPAN)}), 200)  # not sampled
        self.assertEqual(check(self.serve, "d", {"traceparent": "00-zz-not-a-traceparent"}), 200)  # ignored: a root
        self.assertEqual(check(self.serve, "e", {"b3": "a3ce929d0e0e4736-%s-1" % SPAN}), 200)
        received = self.receiver.received
        wait_until(lambda: received.count() >= 6, "six spans at the receiver", seconds=20)
        time.sleep(1.5)  # one more export interval: nothing else comes
        spans = received.spans
        self.assertEqual(len(spans), 6, [attrs(s) for s in spans])
        for s in spans:
            self.assertEqual(s.name, "ratekeeper.decide")
            self.assertEqual(len(s.trace_id), 16)
            self.assertEqual(len(s.span_id), 8)
            self.assertLessEqual(s.start_time_unix_nano, s.end_time_unix_nano)
            self.assertEqual(attrs(s)["ratelimit.domain"], "edge")
            self.assertEqual(attrs(s)["ratelimit.rules"], ["per_user"])
            self.assertEqual(attrs(s)["ratelimit.store"], "memory")
            self.assertEqual(attrs(s)["ratelimit.protocol"], "http")
        child = spans[0]
        self.assertEqual(child.trace_id.hex(), TRACE)
        self.assertEqual(child.parent_span_id.hex(), SPAN)
        self.assertNotEqual(child.span_id.hex(), SPAN)
        self.assertEqual(child.trace_state, "congo=t61rcWkgMzE")
        self.assertEqual(attrs(child)["ratelimit.result"], "OK")
        self.assertEqual(child.status.code, 1)  # OK
        over = spans[3]
        self.assertEqual(attrs(over)["ratelimit.result"], "OVER_LIMIT")
        self.assertGreater(attrs(over)["ratelimit.retry_after_ms"], 0)
        roots = [spans[1], spans[2], spans[3], spans[4]]  # no caller's trace, or a malformed one
        for s in roots:
            self.assertEqual(s.parent_span_id, b"")
        self.assertEqual(len({s.trace_id for s in roots}), 4)  # each a new trace
        b3 = spans[5]
        self.assertEqual(b3.trace_id.hex(), "0000000000000000a3ce929d0e0e4736")
        self.assertEqual(b3.parent_span_id.hex(), SPAN)
        self.assertEqual(received.resources[0]["service.name"], "rk-test")
        self.assertEqual(received.headers[0]["x-api-key"], "k1")
        self.assertEqual(self.serve.metric('ratekeeper_trace_spans_total{result="exported"}'), 6)


class GrpcTracing(unittest.TestCase):
    """gRPC both ways: ShouldRateLimit's metadata in, OTLP/gRPC out; configured by OTEL_* variables alone."""

    def test_metadata_is_the_parent_and_the_variables_configure_the_exporter(self):
        receiver = GrpcReceiver()
        grpc_port = free_port()
        env = dict(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:%d" % receiver.port,
                   OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_SERVICE_NAME="rk-grpc",
                   OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20t",
                   OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0")
        os.environ.update(env)  # the server inherits them
        try:
            serve = Serve(BINARY, RULES, ["--grpc", "127.0.0.1:%d" % grpc_port])
        finally:
            for k in env:
                del os.environ[k]
        try:
            channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port)
            should = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                         request_serializer=rls.RateLimitRequest.SerializeToString,
                                         response_deserializer=rls.RateLimitResponse.FromString)
            request = rls.RateLimitRequest(domain="edge")
            request.descriptors.add().entries.add(key="user", value="g")
            should(request, timeout=10, metadata=[("traceparent", "00-%s-%s-01" % (TRACE, SPAN))])
            for _ in range(20):  # no caller's decision at rate 0: none sampled
                should(request, timeout=10)
            should(request, timeout=10, metadata=[("x-b3-traceid", TRACE), ("x-b3-spanid", SPAN),
                                                  ("x-b3-sampled", "1")])
            channel.close()
            wait_until(lambda: receiver.received.count() >= 2, "two spans over gRPC", seconds=20)
            time.sleep(1.5)
            spans = receiver.received.spans
            self.assertEqual(len(spans), 2)
            for s in spans:
                self.assertEqual(s.trace_id.hex(), TRACE)
                self.assertEqual(s.parent_span_id.hex(), SPAN)
                self.assertEqual(attrs(s)["ratelimit.protocol"], "grpc")
            self.assertEqual(attrs(spans[0])["ratelimit.result"], "OK")
            self.assertEqual(attrs(spans[1])["ratelimit.result"], "OVER_LIMIT")
            self.assertEqual(receiver.received.resources[0]["service.name"], "rk-grpc")
            self.assertEqual(receiver.received.headers[0]["authorization"], "Bearer t")
        finally:
            serve.stop(must_stop=True)
            receiver.close()


class CollectorDownOrSilent(unittest.TestCase):
    """Bad input: an OTLP endpoint that is down or does not answer never delays a decision; its spans are dropped
    and counted."""

    def run_against(self, endpoint, protocol):
        serve = Serve(BINARY, RULES.replace("2, name", "1000000, name"),
                      ["--otlp-endpoint", endpoint, "--otlp-protocol", protocol, "--trace-sample-rate", "1"])
        try:
            conn = serve.connection()
            slowest = 0
            for i in range(300):
                t = time.monotonic()
                self.assertEqual(check(serve, "u%d" % (i % 7)), 200)
                slowest = max(slowest, time.monotonic() - t)
            conn.close()
            # The exporter's timeout is 5 s: a decision that waited on the collector would take that long.
            self.assertLess(slowest, 2.5)
            wait_until(lambda: serve.metric('ratekeeper_trace_spans_total{result="dropped"}') > 0,
                       "spans counted as dropped", seconds=30)
            self.assertEqual(serve.metric('ratekeeper_trace_spans_total{result="exported"}'), 0)
            self.assertIn("trace export failed", serve.output())
        finally:
            serve.stop(must_stop=True)

    def test_down(self):
        port = free_port()  # nothing listens there
        self.run_against("http://127.0.0.1:%d" % port, "http/protobuf")
        self.run_against("127.0.0.1:%d" % port, "grpc")

    def test_silent(self):
        with socket.socket() as silent:  # accepts into its backlog, never reads nor answers
            silent.bind(("127.0.0.1", 0))
            silent.listen(64)
            self.run_against("http://127.0.0.1:%d" % silent.getsockname()[1], "http/protobuf")

    def test_a_bad_endpoint_is_refused_at_start_naming_its_flag(self):
        d = tempfile.mkdtemp(prefix="rk-trace-")
        try:
            rules = os.path.join(d, "rules.yaml")
            with open(rules, "w") as f:
                f.write(RULES)
            for args, message in [
                    (["--otlp-endpoint", "collector:4318"], "--otlp-endpoint: 'collector:4318/v1/traces' is not"),
                    (["--otlp-endpoint", "http://c:4318", "--otlp-protocol", "udp"], "--otlp-protocol: 'udp'"),
                    (["--trace-sample-rate", "1.5"], "--trace-sample-rate: '1.5' is not a number from 0 to 1"),
                    (["--access-log", os.path.join(d, "no", "such", "dir")], "--access-log: cannot open")]:
                r = subprocess.run([BINARY, "serve", "--config", rules, "--http", "127.0.0.1:%d" % free_port(),
                                    *args], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Logs(unittest.TestCase):
    def test_text_log_format_and_the_access_log(self):
        d = tempfile.mkdtemp(prefix="rk-access-")
        access = os.path.join(d, "access.log")
        serve = Serve(BINARY, RULES, ["--log-format", "text", "--access-log", access], d=d)
        try:
            check(serve, "x", {"traceparent": "00-%s-%s-01" % (TRACE, SPAN)})
            check(serve, "x")
            self.assertEqual(check(serve, "x"), 429)
            def read():
                with open(access) as f:
                    return f.read().splitlines()
            wait_until(lambda: len(read()) >= 3, "three access log lines")
            lines = [json.loads(line) for line in read()]
            self.assertEqual([line["result"] for line in lines], ["OK", "OK", "OVER_LIMIT"])
            first = lines[0]
            for key in ("ts", "msg", "protocol", "domain", "result", "store", "rules", "retry_after_ms",
                        "duration_us"):
                self.assertIn(key, first)
            self.assertEqual(first["domain"], "edge")
            self.assertEqual(first["rules"], ["per_user"])
            self.assertEqual(first["trace_id"], TRACE)  # the caller's, with tracing off
            self.assertNotIn("trace_id", lines[1])
            self.assertGreater(lines[2]["retry_after_ms"], 0)
            out = serve.output()
            self.assertRegex(out, r"(?m)^\d{4}-\d\d-\d\dT[\d:.]+Z info \"rules loaded\" version=")
            self.assertNotIn('{"ts"', out)
        finally:
            serve.stop(must_stop=True)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    BINARY, PROTO_DIR = sys.argv[1], sys.argv[2]
    gen = tempfile.mkdtemp(prefix="rk-otlp-py-")
    try:
        otlp, rls = generate(gen)
        unittest.main(argv=sys.argv[:1], verbosity=2)
    finally:
        shutil.rmtree(gen, ignore_errors=True)
