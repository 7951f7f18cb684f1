// bench/compare's Node.js peer: rate-limiter-flexible's RateLimiterRedis (a fixed window: INCRBY + EXPIRE in one
// Lua script) on one ioredis connection, used the natural way: many consume() promises outstanding at once.
//
//   node rlf_load.js load PORT POINTS DURATION_S INFLIGHT KEYS SECONDS
//       INFLIGHT concurrent loops of `await consume(key)` over KEYS random keys for SECONDS (after 0.5 s of
//       warm-up); prints "decisions_per_s=... p99_us=... allowed=...".
//   node rlf_load.js populate PORT POINTS DURATION_S KEYS      one consume on each of KEYS distinct keys
//   node rlf_load.js trace PORT POINTS DURATION_S < offsets    one key in real time; "<seconds> <0|1>" a line
'use strict';
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

function limiter(port, points, duration) {
  const client = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: true });
  return { client, rl: new RateLimiterRedis({ storeClient: client, points, duration, keyPrefix: 'rlf' }) };
}

async function consume(rl, key) {
  try {
    await rl.consume(key);
    return 1;
  } catch (e) {
    if (e instanceof Error) throw e;  // a Redis error; a RateLimiterRes is a refusal
    return 0;
  }
}

async function load(port, points, duration, inflight, keys, seconds) {
  const { client, rl } = limiter(port, points, duration);
  const lat = [];
  let done = 0, allowed = 0, measuring = false, until = performance.now() + 500;
  const loop = async () => {
    while (performance.now() < until) {
      const t = performance.now();
      const ok = await consume(rl, 'k' + Math.floor(Math.random() * keys));
      if (measuring) {
        lat.push(performance.now() - t);
        done++;
        allowed += ok;
      }
    }
  };
  await Promise.all(Array.from({ length: inflight }, loop));  // warm-up
  measuring = true;
  const start = performance.now();
  until = start + seconds * 1000;
  await Promise.all(Array.from({ length: inflight }, loop));
  const elapsed = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  console.log(`decisions_per_s=${(done / elapsed).toFixed(0)} p99_us=${(lat[Math.floor(lat.length * 0.99)] * 1000).toFixed(1)} allowed=${(allowed / done).toFixed(4)}`);
  client.disconnect();
}

async function populate(port, points, duration, keys) {
  const { client, rl } = limiter(port, points, duration);
  for (let i = 0; i < keys; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(keys, i + 1000); j++) batch.push(consume(rl, 'm' + j));
    await Promise.all(batch);
  }
  client.disconnect();
}

async function trace(port, points, duration) {
  const { client, rl } = limiter(port, points, duration);
  const offsets = require('fs').readFileSync(0, 'utf8').split(/\s+/).filter(Boolean).map(Number);
  await consume(rl, 'warmup');
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const start = performance.now();
  const out = [];
  for (const off of offsets) {
    // setTimeout is coarse (1 ms); spin the last millisecond.
    let d = start + off * 1000 - performance.now();
    if (d > 2) await sleep(d - 1.5);
    while (performance.now() < start + off * 1000) { /* spin */ }
    const t = (performance.now() - start) / 1000;
    out.push(`${t.toFixed(6)} ${await consume(rl, 'trace')}`);
  }
  console.log(out.join('\n'));
  client.disconnect();
}

const [cmd, port, points, duration, ...rest] = process.argv.slice(2);
const P = Number(port), N = Number(points), D = Number(duration);
const main = cmd === 'load' ? load(P, N, D, Number(rest[0]), Number(rest[1]), Number(rest[2]))
  : cmd === 'populate' ? populate(P, N, D, Number(rest[0]))
  : cmd === 'trace' ? trace(P, N, D)
  : Promise.reject(new Error('unknown command ' + cmd));
main.catch((e) => { console.error(e); process.exit(1); });
