// The dashboard end to end: the real `ratekeeper serve` on free loopback ports with examples/rules.yaml, Debian's
// chromium headless driven by playwright-core, traffic over the public HTTP API to every kind of rule the file has.
// Run by ctest:
//
//   node ui_test.mjs --binary build/dev/ratekeeper --chromium /usr/bin/chromium --modules DIR/node_modules
//                    [--rules examples/rules.yaml] [--screenshot docs/img/dashboard.png]   (also the docs' picture)
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
import { fileURLToPath } from "node:url";

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
const RULES = path.resolve(arg("rules", path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..",
  "examples", "rules.yaml")));
const { chromium } = createRequire(path.join(MODULES, "..", "package.json"))("playwright-core");

const TOKEN = "ui-test-token-0123456789";  // --admin-token-file: the page signs in with it
const ABUSER = "198.51.100.23";
const POLITE = "192.0.2.10";
const BLOCKED = "203.0.113.66";  // examples/rules.yaml blocks it outright
const LIMIT = 5;                 // examples/rules.yaml's per_client: EARRRL, 5 a second
const WIDTHS = [1400, 2000];     // the hot keys' every column must be in sight at both

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

async function check(httpPort, key, value) {
  const res = await fetch(`http://127.0.0.1:${httpPort}/v1/check`, {
    method: "POST",
    body: JSON.stringify({ domain: "edge", descriptors: [{ entries: [{ key, value }] }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

// Columns of a table (by their header's text) that stick out of the section holding it, at the page's width: what a
// reader would have to scroll sideways to see.
function hiddenColumns(page, table, headers) {
  return page.evaluate(([table, headers]) => {
    const t = document.getElementById(table);
    const section = t.closest("section");
    const box = section.getBoundingClientRect();
    const right = Math.min(box.left + section.clientWidth, window.innerWidth);
    const names = [...t.tHead.rows[0].cells].map((c) => c.textContent);
    const out = [];
    for (const h of headers) {
      const i = names.indexOf(h);
      if (i < 0) { out.push(h + ": no such column"); continue; }
      for (const row of t.rows) {
        const cell = row.cells[row.cells.length === names.length ? i : 0];
        if (cell.getBoundingClientRect().right > right + 0.5) { out.push(h); break; }
      }
    }
    if (section.scrollWidth > section.clientWidth) out.push("the section scrolls sideways");
    return out;
  }, [table, headers]);
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
  fs.writeFileSync(path.join(tmp, "admin.token"), TOKEN + "\n");
  const httpPort = await freePort();
  const adminPort = await freePort();
  const log = fs.openSync(path.join(tmp, "server.log"), "w");
  server = spawn(BINARY, ["serve", "--config", RULES, "--http", `127.0.0.1:${httpPort}`,
    "--admin", `127.0.0.1:${adminPort}`, "--admin-token-file", path.join(tmp, "admin.token")],
  { stdio: ["ignore", log, log] });
  const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
  await until("ratekeeper to be ready", async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).ok);
  const admin = `http://127.0.0.1:${adminPort}`;

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const context = await browser.newContext({ viewport: { width: WIDTHS[0], height: 1000 } });
  const page = await context.newPage();
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

  const blocked = await page.locator("#rules tr", { hasText: BLOCKED }).locator("td").nth(3).textContent();
  assert.equal(blocked, "blocked", "the blocked rule's algorithm is what the server says");
  step("the blocked rule shows its algorithm as the server reports it: " + blocked);

  // Traffic over the public API to every rule of examples/rules.yaml: the abuser hammers past its EARRRL limit, the
  // polite client sends three, the blocked address a few, API keys (one a partner's), logins past their 10 in 90 s,
  // a shadow-mode quota; in rounds, each once the page has polled the rates again, so that the chart has points.
  const statuses = [];
  const polls = () => page.evaluate(() => {
    const line = document.querySelector("#rates-chart polyline");
    return line ? line.getAttribute("points").split(" ").length : 0;
  });
  for (let round = 0; round < 4; round++) {
    const before = await polls();
    for (let i = 0; i < 20; i++) statuses.push(await check(httpPort, "remote_address", ABUSER));
    if (round < 3) assert.equal(await check(httpPort, "remote_address", POLITE), 200);
    assert.equal(await check(httpPort, "remote_address", BLOCKED), 429);
    for (let i = 0; i < 3; i++) await check(httpPort, "api_key", "alice-key-" + (i % 2));
    await check(httpPort, "api_key", "partner-acme");
    for (let i = 0; i < 4; i++) await check(httpPort, "path", "/login");
    await check(httpPort, "monthly", "acme");
    await until("the page to poll the rates again", async () => (await polls()) > before);
  }
  assert.equal(statuses[0], 200);
  assert.equal(statuses.at(-1), 429, "the API itself refuses the abuser");
  step("traffic sent: the abuser is refused by the API (" + statuses.filter((s) => s === 429).length + " of " +
    statuses.length + ")");

  const abuserRow = page.locator(`#hot tr[data-key="${ABUSER}"]`);
  await abuserRow.and(page.locator("tr.limited")).waitFor({ timeout: 10000 });
  assert.equal(await abuserRow.locator(".badge").textContent(), "limited");
  const estimate = Number(await abuserRow.locator("td").nth(3).textContent());
  assert.ok(estimate > LIMIT, "EARRRL's estimate above the limit of " + LIMIT + "/s, got " + estimate);
  const polite = page.locator(`#hot tr[data-key="${POLITE}"]`);
  await polite.waitFor({ timeout: 10000 });
  assert.equal(await polite.getAttribute("class"), "ok");
  const blockedRow = page.locator(`#hot tr[data-key="${BLOCKED}"]`);
  await blockedRow.waitFor({ timeout: 10000 });
  assert.equal(await blockedRow.locator(".badge").textContent(), "limited");
  assert.equal(await blockedRow.locator("td").nth(5).textContent(), "never");
  step("the hot keys show the abuser limited (estimate " + estimate + "), the polite client ok, the blocked " +
    "address limited for ever");

  await page.waitForFunction(() => document.querySelectorAll("#rates-chart polyline").length >= 2 &&
    document.getElementById("rates-legend").textContent.includes("per_client"), null, { timeout: 10000 });
  step("the rates chart draws the rule's allowed and refused lines");

  // A page opened after the traffic draws the last minutes at once (the server's samples), not "no decisions".
  const later = await context.newPage();
  await later.goto(admin + "/ui");
  await later.waitForFunction(() => document.getElementById("status").textContent === "live", null,
    { timeout: 10000 });
  const drawn = await later.evaluate(() => ({
    points: [...document.querySelectorAll("#rates-chart polyline")].map((l) => l.getAttribute("points").split(" ")
      .length),
    empty: document.getElementById("rates-chart").textContent.includes("no decisions"),
  }));
  assert.ok(!drawn.empty && Math.max(...drawn.points) >= 3,
    "a page opened later draws the server's samples at its first poll: " + JSON.stringify(drawn));
  await later.close();
  step("a page opened after the traffic draws it at once (" + Math.max(...drawn.points) + " points at first poll)");

  // Every column of the hot keys (retry after and the state last) and of the rules is in sight at both widths.
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 1000 });
    const hidden = (await hiddenColumns(page, "hot", ["retry after", "state"]))
      .concat(await hiddenColumns(page, "rules", ["parameters", "keys"]));
    assert.deepEqual(hidden, [], "columns out of sight at " + width + " px");
  }
  await page.setViewportSize({ width: WIDTHS[0], height: 1000 });
  step("every column of the hot keys and the rules is in sight at " + WIDTHS.join(" and ") + " px");
  const text = await page.evaluate(() => document.body.innerText);
  assert.ok(!/undefined|NaN/.test(text), "the page shows no undefined or NaN");

  // The rules' tracked keys, as the rules table refreshes them (every 5 s): the abuser and the polite client.
  await page.waitForFunction(() => [...document.querySelectorAll("#rules tr")].some((r) =>
    r.cells[2] && r.cells[2].textContent === "per_client" && r.cells[7].textContent === "2"), null, { timeout: 15000 });
  step("the rules table shows the keys each rule tracks");

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
  assert.equal(perClient.ok + perClient.over_limit, statuses.length + 3,
    "every decision counted once, the page's reads none");

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
