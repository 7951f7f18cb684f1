#!/usr/bin/python3
"""The C API from Python through ctypes, as another language's FFI would use it: the shared library, opaque
handles, error codes and messages. Run by ctest: ctypes_test.py path/to/libratekeeper.so"""
import ctypes
import math
import os
import random
import sys
import threading
import unittest

LIB = None


class Spec(ctypes.Structure):
    _fields_ = [("algorithm", ctypes.c_char_p), ("limit", ctypes.c_double), ("window_ns", ctypes.c_int64),
                ("half_life_ns", ctypes.c_int64), ("burst", ctypes.c_double), ("capacity", ctypes.c_double),
                ("count_refused", ctypes.c_int), ("max_keys", ctypes.c_uint64), ("max_key_bytes", ctypes.c_uint64)]


class Decision(ctypes.Structure):
    _fields_ = [("allowed", ctypes.c_int), ("limit", ctypes.c_double), ("remaining", ctypes.c_double),
                ("retry_after_ns", ctypes.c_int64), ("reset_after_ns", ctypes.c_int64), ("delay_ns", ctypes.c_int64),
                ("has_estimate", ctypes.c_int), ("estimate", ctypes.c_double)]


class Stats(ctypes.Structure):
    _fields_ = [("keys", ctypes.c_uint64), ("evictions", ctypes.c_uint64), ("forgotten", ctypes.c_uint64),
                ("memory_bytes", ctypes.c_uint64)]


RK_OK, RK_INVALID_ARGUMENT = 0, 1
NEVER = 2**63 - 1


def load(path):
    lib = ctypes.CDLL(path)
    lib.rk_version.restype = ctypes.c_char_p
    lib.rk_last_error.restype = ctypes.c_char_p
    lib.rk_spec_init.argtypes = [ctypes.POINTER(Spec)]
    lib.rk_limiter_new.argtypes = [ctypes.POINTER(Spec), ctypes.POINTER(ctypes.c_void_p)]
    lib.rk_limiter_free.argtypes = [ctypes.c_void_p]
    for name in ("rk_limiter_check_at", "rk_limiter_peek_at"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64,
                                       ctypes.c_uint64, ctypes.POINTER(Decision)]
    lib.rk_limiter_check.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64,
                                     ctypes.POINTER(Decision)]
    lib.rk_limiter_check_many_at.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                                             ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_uint64),
                                             ctypes.c_size_t, ctypes.c_int64, ctypes.POINTER(Decision)]
    lib.rk_limiter_reset.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]
    lib.rk_limiter_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(Stats)]
    return lib


class Limiter:
    """What a Python binding would look like: errors become exceptions carrying the library's message."""

    def __init__(self, algorithm, limit, **params):
        spec = Spec()
        LIB.rk_spec_init(ctypes.byref(spec))
        spec.algorithm = algorithm.encode()
        spec.limit = limit
        for k, v in params.items():
            setattr(spec, k, v)
        self.handle = ctypes.c_void_p()
        status = LIB.rk_limiter_new(ctypes.byref(spec), ctypes.byref(self.handle))
        if status != RK_OK:
            raise ValueError(LIB.rk_last_error().decode())

    def check_at(self, key, now_ns, cost=1):
        d = Decision()
        status = LIB.rk_limiter_check_at(self.handle, key, len(key), now_ns, cost, ctypes.byref(d))
        if status != RK_OK:
            raise ValueError(LIB.rk_last_error().decode())
        return d

    def check_many_at(self, keys, now_ns, costs=None):
        n = len(keys)
        c_keys = (ctypes.c_char_p * n)(*keys)
        lens = (ctypes.c_size_t * n)(*[len(k) for k in keys])
        c_costs = (ctypes.c_uint64 * n)(*costs) if costs is not None else None
        out = (Decision * n)()
        status = LIB.rk_limiter_check_many_at(self.handle, c_keys, lens, c_costs, n, now_ns, out)
        if status != RK_OK:
            raise ValueError(LIB.rk_last_error().decode())
        return list(out)

    def stats(self):
        s = Stats()
        assert LIB.rk_limiter_stats(self.handle, ctypes.byref(s)) == RK_OK
        return s

    def close(self):
        LIB.rk_limiter_free(self.handle)
        self.handle = None


class CApiFromPython(unittest.TestCase):
    def test_version(self):
        self.assertEqual(LIB.rk_version(), os.environ["RK_PROJECT_VERSION"].encode())

    def test_the_seeds_earrrl_figure(self):
        lim = Limiter("earrrl", 0.5, half_life_ns=10 * 10**9)
        try:
            # The seed's request #i at t = i s.
            decisions = [lim.check_at(b"client", i * 10**9) for i in range(0, 71)]
            self.assertAlmostEqual(decisions[1].estimate, 0.0647, places=3)
            refused = [i for i, d in enumerate(decisions) if not d.allowed]
            self.assertEqual(refused[0], 11)
            self.assertAlmostEqual(decisions[11].estimate, 0.515, places=3)
            self.assertAlmostEqual(decisions[70].estimate, 0.958, places=3)
            self.assertTrue(all(d.has_estimate == 1 for d in decisions))
        finally:
            lim.close()

    def test_gcra_and_the_queue(self):
        lim = Limiter("leaky_queue", 2, burst=2)  # 2 a second out, 2 may wait
        try:
            delays = [lim.check_at(b"q", 0).delay_ns for _ in range(3)]
            self.assertEqual(delays, [0, 500_000_000, 1_000_000_000])
            self.assertEqual(lim.check_at(b"q", 0).allowed, 0)
        finally:
            lim.close()

    def test_bad_specs_raise_with_the_parameter_named(self):
        for args, params, says in [(("earrrl", 1), {}, "half_life"), (("gcra", -1), {}, "limit"),
                                   (("gcra", math.nan), {}, "limit"), (("nope", 1), {}, "algorithm: 'nope'"),
                                   (("fixed_window", 1), {"window_ns": 0}, "window"),
                                   (("fixed_window", 1), {"count_refused": 7}, "count_refused: 7")]:
            with self.assertRaises(ValueError) as e:
                Limiter(*args, **params)
            self.assertIn(says, str(e.exception))

    def test_bad_calls_change_nothing(self):
        lim = Limiter("fixed_window", 1, max_key_bytes=8)
        try:
            with self.assertRaises(ValueError) as e:
                lim.check_at(b"x" * 9, 0)
            self.assertIn("9 bytes", str(e.exception))
            self.assertEqual(lim.stats().keys, 0)
            self.assertEqual(lim.check_at(b"k", 0).allowed, 1)
            self.assertEqual(lim.check_at(b"k", 0).allowed, 0)
            self.assertEqual(lim.check_at(b"k", 0, cost=2).retry_after_ns, NEVER)
            self.assertEqual(LIB.rk_limiter_check_at(None, b"k", 1, 0, 1, ctypes.byref(Decision())),
                             RK_INVALID_ARGUMENT)
            self.assertEqual(LIB.rk_last_error(), b"limiter is NULL")
        finally:
            lim.close()

    def test_check_many_decides_as_single_checks(self):
        rng = random.Random(5)
        for algorithm in ("earrrl", "gcra", "leaky_queue", "token_bucket", "leaky_bucket", "fixed_window",
                          "sliding_log", "sliding_window"):
            params = {"half_life_ns": 10**9} if algorithm == "earrrl" else {}
            batched, single = Limiter(algorithm, 4, **params), Limiter(algorithm, 4, **params)
            pool = [b"k%d" % i for i in range(30)] + [b"x" * 80, b""]
            now = 0
            for _ in range(60):
                keys = [rng.choice(pool) for _ in range(rng.randint(1, 24))]
                costs = [rng.randint(0, 3) for _ in keys]
                now += rng.randint(0, 300_000_000)
                many = batched.check_many_at(keys, now, costs)
                for key, cost, d in zip(keys, costs, many):
                    one = single.check_at(key, now, cost)
                    for field, _ in Decision._fields_:
                        self.assertEqual(getattr(d, field), getattr(one, field), (algorithm, key, cost, field))
            batched.close()
            single.close()

    def test_check_many_costs_default_to_one_and_errors_decide_nothing(self):
        lim = Limiter("fixed_window", 2)
        self.assertEqual([d.allowed for d in lim.check_many_at([b"a", b"a", b"a"], 0)], [1, 1, 0])
        lens = (ctypes.c_size_t * 2)(1, 3)
        keys = (ctypes.c_char_p * 2)(b"b", None)
        self.assertEqual(LIB.rk_limiter_check_many_at(lim.handle, keys, lens, None, 2, 0, (Decision * 2)()),
                         RK_INVALID_ARGUMENT)
        self.assertIn(b"keys[1] is NULL", LIB.rk_last_error())
        self.assertEqual(lim.stats().keys, 1)  # "b" was not decided
        lim.close()

    def test_threads_share_one_limiter_exactly(self):
        lim = Limiter("fixed_window", 500, window_ns=3600 * 10**9)
        allowed = []

        def run():
            allowed.append(sum(lim.check_at(b"shared", 0).allowed for _ in range(1000)))

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        lim.close()
        self.assertEqual(sum(allowed), 500)


if __name__ == "__main__":
    LIB = load(sys.argv.pop(1))
    unittest.main(verbosity=2)
