// What the browser tests share: the real `openagents serve --http` in a temporary folder (its own
// operator config and runner registry with the example runners), and headless Chromium from the
// distribution's package, driven by playwright-core.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BIN = process.env.OPENAGENTS_BIN ?? join(ROOT, "target/debug/openagents");
const RUNNERS = { echo: "openagents-runner-echo", ask: "openagents-runner-ask", slow: "openagents-runner-slow" };
export const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
export const SCREENSHOTS = join(ROOT, "target", "web-screenshots");
/** How long a browser-side wait may take before the test fails. */
export const WAIT_MS = 20_000;

/** A temporary folder with an operator config (`extraConfig` appended to `[capabilities.server]`) and a runner registry. */
export class Setup {
  constructor(name, extraConfig = "") {
    this.dir = mkdtempSync(join(tmpdir(), `openagents-web-${name}-`));
    const config = join(this.dir, "config.toml");
    writeFileSync(config, `[capabilities.server]\nenabled = true\n${extraConfig}`);
    const registry = join(this.dir, "runners.toml");
    writeFileSync(registry, Object.entries(RUNNERS).map(([id, bin]) => `[runners.${id}]\ncommand = "${join(ROOT, "target/debug", bin)}"\n`).join("\n"));
    this.env = { ...process.env, OPENAGENTS_CONFIG: config, OPENAGENTS_RUNNERS: registry, HOME: this.dir, XDG_RUNTIME_DIR: this.dir };
  }

  /** Writes a new random token to a file (mode 0600) and returns both. */
  token(name = "admin") {
    const token = `tok-${randomBytes(18).toString("hex")}`;
    const file = join(this.dir, `${name}.token`);
    writeFileSync(file, token);
    chmodSync(file, 0o600);
    return { token, file };
  }

  /**
   * A credentials file with an admin, an observer (`watcher`), a controller (`operator`), an
   * exact grant with `submit` but not `interrupt` (`submitter`) and one that may submit but not
   * read events (`blind`); returns the tokens and the file.
   */
  credentials() {
    const admin = `tok-${randomBytes(18).toString("hex")}`;
    const watcher = `tok-${randomBytes(18).toString("hex")}`;
    const operator = `tok-${randomBytes(18).toString("hex")}`;
    const submitter = `tok-${randomBytes(18).toString("hex")}`;
    const blind = `tok-${randomBytes(18).toString("hex")}`;
    const file = join(this.dir, "credentials.toml");
    writeFileSync(
      file,
      `[credentials.admin]\ntoken = "${admin}"\nrole = "admin"\n\n[credentials.watcher]\ntoken = "${watcher}"\nrole = "observer"\n\n` +
        `[credentials.operator]\ntoken = "${operator}"\nrole = "controller"\n\n` +
        `[credentials.submitter]\ntoken = "${submitter}"\nmethods = ["status", "subscribe", "submit"]\nevents = true\n\n` +
        `[credentials.blind]\ntoken = "${blind}"\nmethods = ["status", "submit"]\nevents = false\n`,
    );
    chmodSync(file, 0o600);
    return { admin, watcher, operator, submitter, blind, file };
  }

  cleanup() {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts `openagents serve --http ARGS` and waits for its readiness line (the URL on stdout). */
export async function serve(setup, args) {
  const child = spawn(BIN, ["serve", "--http", "--cwd", setup.dir, ...args], { env: setup.env, cwd: setup.dir, stdio: ["ignore", "pipe", "pipe"] });
  const out = { stdout: "", stderr: "" };
  const watchers = new Set();
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (s) => {
    out.stderr += s;
    for (const w of watchers) w();
  });
  const exited = new Promise((r) => child.once("exit", () => r()));
  const rl = createInterface({ input: child.stdout });
  const line = await new Promise((resolveLine, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve --http printed no readiness line within ${WAIT_MS} ms: ${out.stderr}`)), WAIT_MS);
    rl.once("line", (l) => {
      clearTimeout(timer);
      resolveLine(l);
    });
    child.once("exit", (code) => reject(new Error(`serve --http exited (${code}) before it was ready: ${out.stderr}`)));
  });
  out.stdout += `${line}\n`;
  rl.on("line", (l) => (out.stdout += `${l}\n`));
  const url = JSON.parse(line).url;
  return {
    url,
    port: Number(new URL(url).port),
    child,
    output: () => out,
    /** Resolves with the first stderr line matching `re`, once it is written whole. */
    stderrLine: (re) =>
      new Promise((resolveLine, reject) => {
        const timer = setTimeout(() => {
          watchers.delete(check);
          reject(new Error(`no stderr line matching ${re} within ${WAIT_MS} ms: ${out.stderr}`));
        }, WAIT_MS);
        function check() {
          // Whole lines only: a chunk of stderr may end in the middle of one.
          const line = out.stderr.split("\n").slice(0, -1).find((l) => re.test(l));
          if (line === undefined) return;
          watchers.delete(check);
          clearTimeout(timer);
          resolveLine(line);
        }
        watchers.add(check);
        check();
      }),
    /** SIGINT: the runtime shuts down (publishes its last event, closes sockets with 1001) and exits. */
    stop: async (signal = "SIGINT") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** One `POST /rpc` call. */
export async function rpc(url, token, method, params) {
  const r = await fetch(new URL("rpc", url), {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(params === undefined ? { jsonrpc: "2.0", id: 1, method } : { jsonrpc: "2.0", id: 1, method, params }),
  });
  return r.json();
}

/** Headless Chromium with a fresh profile. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "openagents-web-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
      // Names for the loopback address that are not loopback names: pages from them are not a
      // secure context, and each name is its own origin.
      "--host-resolver-rules=MAP *.test 127.0.0.1"],
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(WAIT_MS);
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Opens `url` in a new tab and records what a test checks afterwards: console lines, page
 * errors, JavaScript dialogs (an `alert` would be a script injected by a runner), and the URLs of
 * the WebSockets the page opened.
 */
export async function open(context, url) {
  const page = await context.newPage();
  const seen = { console: [], errors: [], dialogs: [], sockets: [], requests: [] };
  page.on("console", (m) => seen.console.push(m.text()));
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("dialog", (d) => {
    seen.dialogs.push(d.message());
    void d.dismiss();
  });
  page.on("websocket", (ws) => seen.sockets.push(ws.url()));
  page.on("request", (r) => seen.requests.push(r.url()));
  const response = await page.goto(url);
  return { page, seen, response };
}

/** Types the token into the labelled field and presses Enter (the keyboard path), then waits until connected. */
export async function connect(page, token) {
  await page.getByLabel("Token").fill(token);
  await page.getByLabel("Token").press("Enter");
  await waitConnected(page);
}

export async function waitConnected(page) {
  await page.waitForFunction(() => document.querySelector('[data-testid="connection"]')?.textContent === "connected");
}

/** Types a task (and optionally a runner) and clicks Submit. */
export async function submit(page, task, runner = "") {
  await page.getByTestId("task").fill(task);
  await page.getByTestId("runner").fill(runner);
  await page.getByTestId("submit").click();
}

/** Waits until the result region holds `outcome` (completed or failed) and returns its text. */
export async function result(page, outcome) {
  await page.waitForFunction((o) => document.querySelector('[data-testid="result"]')?.getAttribute("data-outcome") === o, outcome);
  return page.getByTestId("result").textContent();
}

/** The events list as [{seq, kind, detail}]. */
export function events(page) {
  return page.$$eval('[data-testid="events"] li', (lis) =>
    lis.map((li) => ({ seq: Number(li.getAttribute("data-seq")), kind: li.getAttribute("data-kind"), detail: li.querySelector(".detail")?.textContent ?? "" })),
  );
}

/** Saves a screenshot under target/web-screenshots and prints its path. */
export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
  return path;
}
