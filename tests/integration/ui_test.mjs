// The dashboard end to end: the real `ratekeeper serve` on free loopback ports, Debian's chromium headless driven
// by playwright-core, traffic over the public HTTP API. Run by ctest:
//
//   node ui_test.mjs --binary build/dev/ratekeeper --chromium /usr/bin/chromium --modules DIR/node_modules
//                    [--screenshot docs/img/dashboard.png]   (also writes the docs' picture)
//
// Every wait polls the real page or process with a deadline; nothing sleeps to let time pass. Exits 0 when every
// check passed; on failure, the temporary directory (rules, server log, screenshot) is kept and named.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

function arg(name, fallback) {
  const i = process.argv.indexOf("--" + name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback === undefined) throw new Error("ui_test.mjs: --" + name + " is required");
  return fallback;
}

const BINARY = arg("binary");
const CHROMIUM = arg("chromium");
const MODULES = arg("modules");
const DOCS_SCREENSHOT = arg("screenshot", "");
const { chromium } = createRequire(path.join(MODULES, "..", "package.json"))("playwright-core");

const RULES = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: earrrl, half_life: 5s, name: per_client}
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra, burst: 20, name: per_api_key}
`;
const TOKEN = "ui-test-token-0123456789";  // --admin-token-file: the page signs in with it
const ABUSER = "198.51.100.23";
const POLITE = "192.0.2.10";

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function until(what, condition, seconds = 10) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 25)); // polling a real process, bounded by the deadline
  }
}

async function check(httpPort, address) {
  const res = await fetch(`http://127.0.0.1:${httpPort}/v1/check`, {
    method: "POST",
    body: JSON.stringify({ domain: "edge", descriptors: [{ entries: [{ key: "remote_address", value: address }] }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rk-ui-"));
let server = null;
let browser = null;
let passed = 0;
let ok = false;

function step(name) {
  passed += 1;
  console.log("ok " + passed + " - " + name);
}

try {
  fs.writeFileSync(path.join(tmp, "rules.yaml"), RULES);
  fs.writeFileSync(path.join(tmp, "admin.token"), TOKEN + "\n");
  const httpPort = await freePort();
  const adminPort = await freePort();
  const log = fs.openSync(path.join(tmp, "server.log"), "w");
  server = spawn(BINARY, ["serve", "--config", path.join(tmp, "rules.yaml"), "--http", `127.0.0.1:${httpPort}`,
    "--admin", `127.0.0.1:${adminPort}`, "--admin-token-file", path.join(tmp, "admin.token")],
  { stdio: ["ignore", log, log] });
  const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
  await until("ratekeeper to be ready", async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).ok);
  const admin = `http://127.0.0.1:${adminPort}`;

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const page = await browser.newPage({ viewport: { width: 1360, height: 1000 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  page.on("requestfailed", (r) => problems.push("request failed: " + r.url()));
  const outside = [];
  page.on("request", (r) => { if (!r.url().startsWith(admin + "/")) outside.push(r.url()); });

  // Behind --admin-token-file the page answers with its login form; the cookie the form sets then carries every
  // request the page makes.
  const login = await page.goto(admin + "/ui");
  assert.equal(login.status(), 401);
  await page.fill("input[name=token]", TOKEN);
  const [response] = await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
  assert.equal(response.status(), 200);
  assert.equal(new URL(page.url()).pathname, "/ui");
  problems.length = 0;  // the 401 of the page before signing in is the point, not a problem
  step("signed in with the admin token through the login form");
  assert.match(response.headers()["content-security-policy"], /default-src 'none'/);
  await page.waitForFunction(() => document.getElementById("status").textContent === "live", null, { timeout: 10000 });
  await page.waitForSelector("#rules td:text-is('per_client')", { timeout: 10000 });
  step("the page loads, polls, and lists the active rules");

  // Traffic over the public API: the abuser hammers past its EARRRL limit, the polite client sends three; in
  // rounds, each once the page has polled the rates again, so that the chart has a few points to draw.
  const statuses = [];
  const polls = () => page.evaluate(() => {
    const line = document.querySelector("#rates-chart polyline");
    return line ? line.getAttribute("points").split(" ").length : 0;
  });
  for (let round = 0; round < 4; round++) {
    const before = await polls();
    for (let i = 0; i < 10; i++) statuses.push(await check(httpPort, ABUSER));
    if (round < 3) assert.equal(await check(httpPort, POLITE), 200);
    await until("the page to poll the rates again", async () => (await polls()) > before);
  }
  assert.equal(statuses[0], 200);
  assert.equal(statuses.at(-1), 429, "the API itself refuses the abuser");
  step("traffic sent: the abuser is refused by the API (" + statuses.filter((s) => s === 429).length + " of 40)");

  const abuserRow = page.locator(`#hot tr[data-key="${ABUSER}"]`);
  await abuserRow.and(page.locator("tr.limited")).waitFor({ timeout: 10000 });
  assert.equal(await abuserRow.locator(".badge").textContent(), "limited");
  const estimate = Number(await abuserRow.locator("td").nth(3).textContent());
  assert.ok(estimate > 2, "EARRRL's estimate above the limit of 2/s, got " + estimate);
  const polite = page.locator(`#hot tr[data-key="${POLITE}"]`);
  await polite.waitFor({ timeout: 10000 });
  assert.equal(await polite.getAttribute("class"), "ok");
  step("the hot keys show the abuser limited (estimate " + estimate + ") and the polite client ok");

  await page.waitForFunction(() => document.querySelectorAll("#rates-chart polyline").length >= 2 &&
    document.getElementById("rates-legend").textContent.includes("per_client"), null, { timeout: 10000 });
  step("the rates chart draws the rule's allowed and refused lines");

  // What-if: EARRRL against an abuser who reforms, plotted.
  await page.selectOption("#whatif select[name=algorithm]", "earrrl");
  await page.fill("#whatif input[name=limit]", "1");
  await page.fill("#whatif input[name=half_life]", "10s");
  await page.selectOption("#whatif select[name=pattern]", "abuser");
  await page.fill("#whatif input[name=rate]", "1.67");
  await page.fill("#whatif input[name=reform_at]", "150s");
  await page.fill("#whatif input[name=duration]", "300s");
  await page.click("#run");
  await page.waitForSelector("#whatif-chart rect.refused", { timeout: 10000 });
  await page.waitForSelector("#whatif-chart rect.allowed", { timeout: 10000 });
  await page.waitForSelector("#whatif-chart polyline.estimate", { timeout: 10000 });
  const summary = await page.textContent("#whatif-summary");
  assert.match(summary, /^earrrl: \d+ of \d+ attempts allowed, first refused at /);
  step("the what-if runs the simulator and plots it: " + summary);

  await page.screenshot({ path: path.join(tmp, "dashboard.png"), fullPage: true });
  const png = fs.readFileSync(path.join(tmp, "dashboard.png"));
  assert.ok(png.length > 10000 && png.subarray(1, 4).toString() === "PNG", "a screenshot was written");
  if (DOCS_SCREENSHOT) fs.copyFileSync(path.join(tmp, "dashboard.png"), DOCS_SCREENSHOT);
  step("screenshot: " + path.join(tmp, "dashboard.png"));

  // A bad what-if is answered with the field, and the page says so; nothing breaks.
  await page.fill("#whatif input[name=limit]", "-1");
  await page.click("#run");
  await page.waitForFunction(() => document.getElementById("whatif-error").textContent.startsWith("limiter.limit:"),
    null, { timeout: 10000 });
  step("a bad what-if shows the field it names: " + (await page.textContent("#whatif-error")));

  // The dashboard's reads charged nothing: the polite client still has its room.
  const rates = await (await fetch(admin + "/v1/admin/rates", { headers: { Authorization: "Bearer " + TOKEN } }))
    .json();
  const perClient = rates.rules.find((r) => r.name === "per_client");
  assert.equal(perClient.ok + perClient.over_limit, 43, "every decision counted once, the page's reads none");

  const unexpected = problems.filter((p) => !p.includes("400 (Bad Request)"));  // the bad what-if's answer
  assert.deepEqual(unexpected, [], "no script errors, CSP violations or failed requests");
  assert.deepEqual(outside, [], "nothing loaded from anywhere but the admin listener");
  step("no errors, no CSP violations, nothing loaded from elsewhere");

  await browser.close();
  browser = null;
  server.kill("SIGTERM");
  const end = await exited;
  assert.equal(end.code, 0, "ratekeeper exits 0 on SIGTERM");
  server = null;
  ok = true;
} catch (e) {
  console.error("not ok - " + (e && e.stack ? e.stack : e));
} finally {
  if (browser) await browser.close().catch(() => {});
  if (server) server.kill("SIGKILL");
  if (ok) {
    fs.rmSync(tmp, { recursive: true, force: true });
  } else {
    console.error("kept for a look: " + tmp);
  }
  console.log(`${passed} passed, ${ok ? 0 : 1} failed`);
  process.exit(ok ? 0 : 1);
}
