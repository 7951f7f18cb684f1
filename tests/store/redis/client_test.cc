// Our Redis client (store/redis/client.h) against a real redis-server: pipelining from many threads, timeouts on a
// paused server, a killed and restarted one, AUTH, scripts by the digest Redis answers and NOSCRIPT after a SCRIPT
// FLUSH, and peers that trickle or answer nothing. What needs no server is in resp_test.cc, url_test.cc,
// cluster_test.cc and scripts_test.cc.
//
// Time bounds are the configured timeout times a factor plus a fixed slack (within()), generous enough for a busy
// 2-core machine under TSan, and each test's other timeouts are set beyond them, so that a bound still tells which
// timeout answered.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "support/redis_process.h"
#include "rules/ruleset.h"
#include "store/redis/remote.h"
#include "store/redis/client.h"
#include "store/redis/lua_script.h"
#include "store/redis/algorithm_scripts.h"

namespace rk::store::redis {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;
using redis_test::TricklingServer;

// How long something bounded by `timeout` may take here: it is answered at its deadline plus a tick of the client's
// timer, and the rest is the scheduling of a loaded machine.
std::chrono::milliseconds within(std::chrono::milliseconds timeout) { return 3 * timeout + 1000ms; }

Result run(Client& c, std::vector<std::string> args) {
  std::promise<Result> p;
  auto f = p.get_future();
  const std::string key = args.size() > 1 ? args[1] : "";
  c.exec(std::move(args), key, [&p](Result r) { p.set_value(std::move(r)); });
  return f.get();
}

ClientOptions options(const RedisProcess& r, std::chrono::milliseconds timeout = 500ms) {
  auto o = ClientOptions::parse_url(r.url());
  o.command_timeout = timeout;
  o.backoff_min = 10ms;
  o.backoff_max = 50ms;
  return o;
}

TEST(RedisClient, ManyThreadsPipelinedAllAnsweredInOrder) {
  RedisProcess redis;
  Client c(options(redis));
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::future<Result>> futures;
      std::vector<std::promise<Result>> promises(500);
      for (int i = 0; i < 500; ++i) {
        futures.push_back(promises[i].get_future());
        const std::string v = std::to_string(t * 1000 + i);
        c.exec({"ECHO", v}, "", [&promises, i](Result r) { promises[i].set_value(std::move(r)); });
      }
      for (int i = 0; i < 500; ++i) {
        Result r = futures[i].get();
        const auto* reply = std::get_if<Reply>(&r);
        right += reply && reply->str == std::to_string(t * 1000 + i);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), 2000);
  const auto s = c.stats();
  EXPECT_LT(s.writes, s.commands / 2) << "commands given together must go out in shared writes";
}

// --redis-spin: the client's thread polls for replies before it sleeps. Replies are met by spins; against a Redis
// that answers nothing, spins that find nothing are backed off (2^n waits slept through after n in a row), so a
// flood of commands to a silent server does not keep a core spinning.
TEST(RedisClient, SpinsMeetRepliesAndBackOffFromASilentServer) {
  RedisProcess redis;
  auto o = options(redis, 300ms);
  o.spin = 1ms;
  Client c(o);
  for (int i = 0; i < 200; ++i) {
    Result r = run(c, {"ECHO", std::to_string(i)});
    ASSERT_TRUE(std::holds_alternative<Reply>(r));
    ASSERT_EQ(std::get<Reply>(r).str, std::to_string(i));
  }
  const auto answered = c.stats();
  EXPECT_GT(answered.spins_answered, 0u) << "a loopback reply within 1 ms of its command is met by a spin";

  redis.signal(SIGSTOP);
  constexpr int kCommands = 200;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, errors = 0;
  for (int i = 0; i < kCommands; ++i) {  // each a wake of the client's thread, while commands await replies
    c.exec({"PING"}, "", [&](Result r) {
      std::lock_guard lock(mu);
      ++done;
      errors += std::holds_alternative<Error>(r);
      cv.notify_all();
    });
    std::this_thread::sleep_for(1ms);
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10 * within(300ms), [&] { return done == kCommands; }));
    EXPECT_EQ(errors, kCommands);  // timed out, or refused while the paused server's connection backs off
  }
  redis.signal(SIGCONT);
  const auto silent = c.stats();
  // Without the backoff, each of the ~200 wakes would start a spin of 1 ms that finds nothing; with it, after n idle
  // spins in a row the next 2^n wakes sleep at once: about log2(wakes) + 1 idle spins, and the 256 cap is far off.
  EXPECT_GT(silent.spins_idle - answered.spins_idle, 0u);
  EXPECT_LE(silent.spins_idle - answered.spins_idle, 16u);
  bool back = false;  // and spinning goes on meeting replies once Redis answers again
  for (int i = 0; i < 300 && !back; ++i) {
    back = std::holds_alternative<Reply>(run(c, {"PING"}));
    if (!back) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(back);
}

TEST(RedisClient, APausedServerTimesOutAndARestartedOneIsReconnected) {
  RedisProcess redis;
  Client c(options(redis, 200ms));
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"SET", "k", "1"})));
  redis.signal(SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  Result r = run(c, {"GET", "k"});
  const auto took = std::chrono::steady_clock::now() - t0;
  redis.signal(SIGCONT);
  ASSERT_TRUE(std::holds_alternative<Error>(r));
  EXPECT_EQ(std::get<Error>(r).kind, Error::Kind::kTimeout);
  EXPECT_LT(took, within(200ms));
  EXPECT_GE(took, 200ms);
  bool back = false;  // the connection was recycled: a new one answers
  for (int i = 0; i < 200 && !back; ++i) {
    back = std::holds_alternative<Reply>(run(c, {"GET", "k"}));
    if (!back) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(back);

  redis.kill();
  r = run(c, {"GET", "k"});
  ASSERT_TRUE(std::holds_alternative<Error>(r));
  EXPECT_EQ(std::get<Error>(r).kind, Error::Kind::kConnection) << std::get<Error>(r).message;
  redis.start();
  back = false;
  for (int i = 0; i < 300 && !back; ++i) {
    back = std::holds_alternative<Reply>(run(c, {"PING"}));
    if (!back) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(back);
}

// A paused Redis accepts new connections (the kernel does) and answers nothing: a command sent while its
// connection is being made again must still be answered within the command timeout, not the connect timeout.
TEST(RedisClient, APausedServerNeverCostsMoreThanTheCommandTimeoutEvenWhileReconnecting) {
  constexpr auto kTimeout = 150ms;
  RedisProcess redis;
  auto o = options(redis, kTimeout);
  o.connect_timeout = 10 * within(kTimeout);  // far longer than the command's budget
  o.password = "";                            // no handshake to wait for either way
  Client c(o);
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"SET", "k", "1"})));
  redis.signal(SIGSTOP);
  int timeouts = 0;
  for (int i = 0; i < 20; ++i) {  // timeouts, backoffs and new connections, in turn
    const auto t0 = std::chrono::steady_clock::now();
    Result r = run(c, {"GET", "k"});
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(std::holds_alternative<Error>(r));
    EXPECT_LT(took, within(kTimeout)) << "attempt " << i << ": " << std::get<Error>(r).message;
    if (std::get<Error>(r).kind == Error::Kind::kTimeout) {
      EXPECT_GE(took, kTimeout) << "attempt " << i;
      ++timeouts;
    }
    std::this_thread::sleep_for(20ms);  // past the backoff (10-50 ms), so that some attempts reconnect
  }
  redis.signal(SIGCONT);
  EXPECT_GE(timeouts, 2);  // some attempts went to a (re)connected, paused server and timed out
  bool back = false;
  for (int i = 0; i < 300 && !back; ++i) {
    back = std::holds_alternative<Reply>(run(c, {"GET", "k"}));
    if (!back) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(back);
}

TEST(RedisClient, AuthWithAPasswordAndItsRefusal) {
  RedisProcess redis({"--requirepass", "s3cret"});
  auto o = options(redis);
  o.password = "s3cret";
  Client good(o);
  Result ok = run(good, {"SET", "a", "1"});
  EXPECT_TRUE(std::holds_alternative<Reply>(ok)) << std::get<Error>(ok).message;
  o.password = "wrong";
  Client bad(o);
  Result r = run(bad, {"GET", "a"});
  ASSERT_TRUE(std::holds_alternative<Error>(r));
  EXPECT_NE(std::get<Error>(r).message.find("AUTH"), std::string::npos) << std::get<Error>(r).message;
}

TEST(RedisClient, ScriptsByTheDigestRedisAnswersSurviveAScriptFlushAndServerErrorsAreKServer) {
  RedisProcess redis;
  Client c(options(redis));
  Script s(c, "return redis.call('INCRBY', KEYS[1], ARGV[1])");
  auto eval = [&](const std::string& by) {
    std::promise<Result> p;
    auto f = p.get_future();
    s.eval({"n"}, {by}, [&p](Result r) { p.set_value(std::move(r)); });
    return f.get();
  };
  EXPECT_EQ(s.digest(), "");
  EXPECT_EQ(std::get<Reply>(eval("2")).integer, 2);  // no digest yet: EVAL
  // The first connection's handshake loaded it, before the EVAL: its digest is the SHA-1 of the source (sha1sum).
  EXPECT_EQ(s.digest(), "8cd00688c05c46bde4a2e60658ef20a2e5c0b248");
  auto commands = c.stats().commands;
  EXPECT_EQ(std::get<Reply>(eval("3")).integer, 5);  // EVALSHA
  EXPECT_EQ(c.stats().commands - commands, 1u);
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"SCRIPT", "FLUSH"})));
  commands = c.stats().commands;
  EXPECT_EQ(std::get<Reply>(eval("1")).integer, 6);  // EVALSHA, NOSCRIPT, EVAL
  EXPECT_EQ(c.stats().commands - commands, 2u);
  Result e = eval("x");
  ASSERT_TRUE(std::holds_alternative<Error>(e));
  EXPECT_EQ(std::get<Error>(e).kind, Error::Kind::kServer);
}

// A script with a function form (lua_script.h): FCALL once Redis said it loaded the library; after a FUNCTION FLUSH one
// call goes by EVAL and the library is loaded again; a user who may not call functions gets the same answers by
// EVALSHA. The counts are Redis's own (INFO commandstats).
TEST(RedisClient, FunctionsAreCalledOnceLoadedSurviveAFunctionFlushAndAUserWithoutThemGetsTheScript) {
  RedisProcess redis;
  auto calls = [&](const std::string& command) { return redis_test::command_calls(redis.port(), command); };
  const std::string body = "local function add(keys, args) return redis.call('INCRBY', keys[1], args[1]) end\n";
  const FunctionSource fn{"#!lua name=rk_test_add_1\n" + body + "redis.register_function('rk_test_add_1', add)\n",
                          "rk_test_add_1"};
  auto eval_with = [](const Script& s, const std::string& by) {
    std::promise<Result> p;
    auto f = p.get_future();
    s.eval({"n"}, {by}, [&p](Result r) { p.set_value(std::move(r)); });
    return f.get();
  };
  {
    Client c(options(redis));
    Script s(c, body + "return add(KEYS, ARGV)\n", fn);
    EXPECT_EQ(std::get<Reply>(eval_with(s, "2")).integer, 2);  // the handshake's answers may not be in yet: EVAL
    ASSERT_TRUE(s.by_function());
    EXPECT_EQ(std::get<Reply>(eval_with(s, "3")).integer, 5);
    EXPECT_EQ(calls("fcall"), 1);
    ASSERT_EQ(redis_test::redis_cli(redis.port(), "FUNCTION FLUSH"), "OK");
    EXPECT_EQ(std::get<Reply>(eval_with(s, "1")).integer, 6);  // FCALL, not found, EVAL; the library loaded again
    EXPECT_EQ(std::get<Reply>(eval_with(s, "1")).integer, 7);
    EXPECT_EQ(calls("fcall"), 3);
    EXPECT_EQ(calls("eval"), 2);
    EXPECT_TRUE(s.by_function());
    // A second client loading the same library: Redis says it exists, which is as good as loaded.
    Client c2(options(redis));
    Script s2(c2, body + "return add(KEYS, ARGV)\n", fn);
    EXPECT_EQ(std::get<Reply>(eval_with(s2, "1")).integer, 8);
    EXPECT_TRUE(s2.by_function());
  }
  ASSERT_EQ(redis_test::redis_cli(redis.port(), "ACL SETUSER nofn on '>pw' '~*' '&*' +@all -function -fcall"), "OK");
  auto o = options(redis);
  o.username = "nofn";
  o.password = "pw";
  Client c(o);
  Script s(c, body + "return add(KEYS, ARGV)\n", fn);
  const long fcalls = calls("fcall");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(std::get<Reply>(eval_with(s, "1")).integer, 9 + i);
  EXPECT_FALSE(s.by_function());
  EXPECT_EQ(calls("fcall"), fcalls);
  EXPECT_GE(calls("evalsha"), 2);
}

TEST(RedisClient, AClosedClientFailsAtOnce) {
  RedisProcess redis;
  Client c(options(redis));
  c.close();
  Result r = run(c, {"PING"});
  ASSERT_TRUE(std::holds_alternative<Error>(r));
  EXPECT_EQ(std::get<Error>(r).kind, Error::Kind::kClosed);
}

// Runs a command, waiting at most `bound`: nullopt if it was not answered by then (a later answer is dropped).
std::optional<Result> run_within(Client& c, std::vector<std::string> args, std::chrono::milliseconds bound) {
  auto p = std::make_shared<std::promise<Result>>();
  auto f = p->get_future();
  c.exec(std::move(args), "", [p](Result r) { p->set_value(std::move(r)); });
  if (f.wait_for(bound) != std::future_status::ready) return std::nullopt;
  return f.get();
}

// Closes the client, failing if that takes longer than `bound`; then lets the hostile peer go, so that a client
// stuck on it is reported rather than hung.
void close_within(Client& c, std::unique_ptr<TricklingServer>& peer, std::chrono::milliseconds bound) {
  auto closing = std::async(std::launch::async, [&c] { c.close(); });
  EXPECT_EQ(closing.wait_for(bound), std::future_status::ready) << "close() waited on the peer";
  peer.reset();
  closing.wait();
}

// Commands against a peer that trickles (or never answers), each answered by its own deadline within `bound`:
// an error, never a reply.
void expect_each_answered_in_time(Client& c, std::chrono::milliseconds bound, const std::string& what) {
  for (int i = 0; i < 10; ++i) {
    const std::optional<Result> r = run_within(c, {"GET", "k"}, bound);
    if (!r) {
      ADD_FAILURE() << what << ": command " << i << " was not answered within " << bound.count() << " ms";
      return;
    }
    const auto* e = std::get_if<Error>(&*r);
    EXPECT_TRUE(e && (e->kind == Error::Kind::kTimeout || e->kind == Error::Kind::kConnection))
        << what << ": command " << i << (e ? ": " + e->message : " got a reply");
    std::this_thread::sleep_for(30ms);  // past some backoffs: new connections, new exchanges with the peer
  }
}

// Issue 19's attack: a Sentinel that answers a byte at a time, or accepts and never answers, held the client's
// thread in a blocking exchange, so that no command was answered, not even by its timeout, and close() (SIGTERM)
// never returned. Each command must now be answered by its deadline, and close() at once.
TEST(RedisClient, ATricklingOrSilentSentinelCostsEachCommandItsTimeoutAndCloseReturns) {
  constexpr auto kTimeout = 100ms;
  for (const auto every : {20ms, 0ms}) {
    auto sentinel = std::make_unique<TricklingServer>(TricklingServer::Options{.every = every});
    auto o = ClientOptions::parse_url("redis+sentinel://127.0.0.1:" + std::to_string(sentinel->port()) + "/mymaster");
    o.command_timeout = kTimeout;
    o.connect_timeout = 2 * within(kTimeout);  // a bound of within() is the command's timeout, not the exchange's
    o.backoff_min = 10ms;
    o.backoff_max = 50ms;
    Client c(o);
    expect_each_answered_in_time(c, within(kTimeout),
                                 "a sentinel sending a byte every " + std::to_string(every.count()) + " ms");
    EXPECT_GE(sentinel->accepted(), 1);  // the client did ask it
    close_within(c, sentinel, within(kTimeout));
  }
}

// The same of a Redis node itself, the handshake (AUTH) included.
TEST(RedisClient, ATricklingOrSilentRedisCostsEachCommandItsTimeoutHandshakeIncluded) {
  constexpr auto kTimeout = 100ms;
  for (const std::string password : {"", "s3cret"}) {
    for (const auto every : {20ms, 0ms}) {
      auto redis = std::make_unique<TricklingServer>(TricklingServer::Options{.every = every});
      auto o = ClientOptions::parse_url("redis://127.0.0.1:" + std::to_string(redis->port()));
      o.password = password;
      o.command_timeout = kTimeout;
      o.connect_timeout = 2 * within(kTimeout);
      o.backoff_min = 10ms;
      o.backoff_max = 50ms;
      Client c(o);
      expect_each_answered_in_time(
          c, within(kTimeout),
          "a Redis sending a byte every " + std::to_string(every.count()) + " ms, password '" + password + "'");
      EXPECT_GE(redis->accepted(), 1);
      close_within(c, redis, within(kTimeout));
    }
  }
}

// A script Redis has lost (SCRIPT FLUSH, a failover) costs two exchanges (EVALSHA, NOSCRIPT, then EVAL), under one
// deadline: a Redis that answers NOSCRIPT late and then trickles must not give the caller a second timeout to wait.
TEST(Script, TheScriptLoadAfterNoscriptSharesTheCommandsDeadline) {
  constexpr auto kTimeout = 2000ms;  // NOSCRIPT at 0.6 of it: before it even on a busy machine, late enough that a
                                     // second timeout for the EVAL would end past 1.6 of it
  const std::string digest = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";  // sha1sum of "return 1"
  auto redis = std::make_unique<TricklingServer>(
      TricklingServer::Options{.every = 20ms,
                               .head = "-NOSCRIPT No matching script. Please use EVAL.\r\n",
                               .head_after = kTimeout * 6 / 10,
                               .greeting = "$40\r\n" + digest + "\r\n+PONG\r\n"});  // SCRIPT LOAD's answer, and PING's
  auto o = ClientOptions::parse_url("redis://127.0.0.1:" + std::to_string(redis->port()));
  o.command_timeout = kTimeout;
  Client c(o);
  Script s(c, "return 1");
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"PING"})));  // the handshake, and the digest learnt
  ASSERT_EQ(s.digest(), digest);
  const auto commands = c.stats().commands;
  auto p = std::make_shared<std::promise<Result>>();
  auto f = p->get_future();
  const auto t0 = std::chrono::steady_clock::now();
  s.eval({"k"}, {}, [p](Result r) { p->set_value(std::move(r)); });
  ASSERT_EQ(f.wait_for(kTimeout * 145 / 100), std::future_status::ready)
      << "EVAL after a late NOSCRIPT got a timeout of its own";
  const auto took = std::chrono::steady_clock::now() - t0;
  const Result r = f.get();
  ASSERT_TRUE(std::holds_alternative<Error>(r));
  EXPECT_EQ(std::get<Error>(r).kind, Error::Kind::kTimeout) << std::get<Error>(r).message;
  EXPECT_GE(took, kTimeout);
  EXPECT_EQ(c.stats().commands - commands, 2u);  // the EVAL was sent: the NOSCRIPT came in time
  close_within(c, redis, within(kTimeout));
}

}  // namespace
}  // namespace rk::store::redis
