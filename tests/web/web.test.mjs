// The web page `openagents serve --http` serves on GET /, in headless Chromium, against the real
// binary and the example runners (echo, ask, slow). Run by tests/web/run-tests.sh.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { connect, events, launch, open, result, rpc, serve, Setup, screenshot, submit, waitConnected } from "./harness.mjs";

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** The page-side checks that the token went nowhere but the handshake and sessionStorage. */
async function assertTokenHidden(page, seen, token, output) {
  assert.ok(!page.url().includes(token), `the address bar holds the token: ${page.url()}`);
  const html = await page.content();
  assert.ok(!html.includes(token), "the page's markup holds the token");
  assert.equal(await page.getByTestId("token").inputValue(), "", "the token field is cleared once used");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("openagents.token")), token, "the token is kept in sessionStorage");
  assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing in localStorage");
  assert.equal(await page.evaluate(() => document.cookie), "", "no cookie");
  for (const url of [...seen.sockets, ...seen.requests]) assert.ok(!url.includes(token), `a URL the page opened holds the token: ${url}`);
  for (const line of seen.console) assert.ok(!line.includes(token), `a console line holds the token: ${line}`);
  if (output) {
    assert.ok(!output.stdout.includes(token), "serve's stdout holds the token");
    assert.ok(!output.stderr.includes(token), "serve's stderr holds the token");
  }
}

test("GET / and its assets need no token and carry the security headers; the page labels its controls", async () => {
  const setup = new Setup("headers");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file]);
  try {
    for (const [path, type] of [["/", "text/html"], ["/assets/app.js", "text/javascript"], ["/assets/app.css", "text/css"], ["/assets/icon.svg", "image/svg+xml"]]) {
      const r = await fetch(new URL(path, server.url));
      assert.equal(r.status, 200, path);
      assert.ok(r.headers.get("content-type")?.startsWith(type), `${path}: ${r.headers.get("content-type")}`);
      assert.equal(r.headers.get("content-security-policy"), CSP, path);
      assert.equal(r.headers.get("x-content-type-options"), "nosniff", path);
      assert.equal(r.headers.get("referrer-policy"), "no-referrer", path);
      await r.arrayBuffer();
    }
    assert.equal((await fetch(new URL("/assets/nope.js", server.url))).status, 404);
    // Everything else still needs the token.
    assert.equal((await fetch(new URL("/rpc", server.url), { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status, 401);

    const { page, seen, response } = await open(browser.context, server.url);
    assert.equal(response.status(), 200);
    assert.equal(response.headers()["content-security-policy"], CSP);
    // Every data-testid hook of the issue exists.
    for (const id of ["token", "connect", "status", "task", "submit", "interrupt", "events", "result", "approval", "approve", "deny", "notice"]) {
      assert.equal(await page.locator(`[data-testid="${id}"]`).count(), 1, `data-testid=${id}`);
    }
    // Labelled controls: each field is found by its label's text.
    for (const label of ["Token", "What should the agent do?", "Runner"]) assert.equal(await page.getByLabel(label, { exact: true }).count(), 1, label);
    // Before connecting, nothing can be submitted.
    assert.ok(await page.getByTestId("submit").isDisabled());
    assert.equal(seen.sockets.length, 0, "no socket before a token is given");
    // A wrong token: refused, said so, not retried.
    await page.getByLabel("Token").fill("tok-wrong");
    await page.getByTestId("connect").click();
    await page.waitForFunction(() => document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") === "failed");
    assert.match(await page.getByTestId("connection").textContent(), /token is not valid/);
    assert.deepEqual(seen.errors, []);
    // A narrow window (a phone) scrolls only vertically.
    await page.setViewportSize({ width: 360, height: 740 });
    await connect(page, token);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), "no horizontal overflow at 360 px");
    await screenshot(page, "narrow-window");
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("an echo turn streams its events with their seq and shows the result; the token stays out of URLs, logs and the page", async () => {
  const setup = new Setup("echo");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file]);
  try {
    const { page, seen } = await open(browser.context, server.url);
    await connect(page, token);
    await page.waitForFunction(() => document.querySelector('[data-testid="status-state"]')?.textContent === "idle");
    assert.match(await page.getByTestId("status-protocol").textContent(), /^\d+\.\d+\.\d+ \(schema [0-9a-f]{12}\)$/);
    await submit(page, "hello from the browser");
    assert.equal(await result(page, "completed"), "hello from the browser");
    assert.equal(await page.getByTestId("progress").textContent(), "hello from the browser", "the progress text, apart from the result");
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="events"] li')].some((li) => li.getAttribute("data-kind") === "turn_completed"));
    const evs = await events(page);
    assert.deepEqual(
      evs.map((e) => e.kind),
      ["turn_started", "text", "text", "text", "text", "turn_completed"],
    );
    assert.deepEqual(evs.filter((e) => e.kind === "text").map((e) => e.detail), ["hello", "from", "the", "browser"]);
    for (let i = 1; i < evs.length; i++) assert.equal(evs[i].seq, evs[i - 1].seq + 1, "consecutive seq");
    assert.equal(await page.getByTestId("status-seq").textContent(), String(evs.at(-1).seq));
    assert.ok(await page.getByTestId("submit").isEnabled(), "Submit is enabled again after the turn");
    await assertTokenHidden(page, seen, token, server.output());
    assert.ok(seen.sockets.every((u) => u.endsWith("/frontend/v2")), `sockets: ${seen.sockets}`);
    assert.deepEqual(seen.errors, []);
    await screenshot(page, "finished-turn");
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("serve --print-web-url prints the fragment URL on stderr only; opening it connects and clears the fragment", async () => {
  const setup = new Setup("print-url");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file, "--print-web-url"]);
  try {
    const line = await server.stderrLine(/#token=/);
    const out = server.output();
    const url = line.slice(line.indexOf("http://"));
    assert.equal(url, `${server.url}#token=${token}`);
    assert.ok(!out.stdout.includes(token), "stdout never holds the token");
    const { page, seen } = await open(browser.context, url);
    await waitConnected(page);
    assert.equal(page.url(), server.url, "the fragment is gone from the address bar");
    assert.ok(seen.requests.every((u) => !u.includes(token)), "the fragment was never sent");
    await submit(page, "via the link");
    assert.equal(await result(page, "completed"), "via the link");
    await assertTokenHidden(page, seen, token, null);
    // A reload in the same tab reconnects from sessionStorage, with no token in the URL.
    await page.reload();
    await waitConnected(page);
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("[capabilities.server] web = false: no page, and --print-web-url is refused", async () => {
  const setup = new Setup("web-off", "web = false\n");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file]);
  try {
    assert.equal((await fetch(server.url)).status, 404);
    assert.equal((await fetch(new URL("/assets/app.js", server.url))).status, 404);
    assert.equal((await rpc(server.url, token, "status")).result.state, "idle", "the runtime itself still serves");
  } finally {
    await server.stop();
  }
  await assert.rejects(serve(setup, ["--runner", "echo", "--token-file", file, "--print-web-url"]), /the web page is off/);
  setup.cleanup();
});

test("approvals through the ask runner: approved, denied; an observer page sees the request but cannot answer it", async () => {
  const setup = new Setup("approvals");
  const creds = setup.credentials();
  const server = await serve(setup, ["--runner", "ask", "--credentials", creds.file, "--approval-timeout", "60"]);
  try {
    const admin = await open(browser.context, server.url);
    const watcher = await open(browser.context, server.url);
    await connect(admin.page, creds.admin);
    await connect(watcher.page, creds.watcher);

    // Approved, from the keyboard: the dialog focuses Approve.
    await submit(admin.page, "deploy the site");
    const dialog = admin.page.getByTestId("approval");
    await dialog.waitFor({ state: "visible" });
    assert.equal(await admin.page.getByTestId("approval-prompt").textContent(), "May I do this: deploy the site?");
    await admin.page.waitForFunction(() => /^Time left: \d+ s$/.test(document.querySelector('[data-testid="approval-info"]')?.textContent ?? ""));
    assert.ok(await admin.page.getByTestId("approve").isVisible());
    // The observer sees the request, with no way to answer it.
    await watcher.page.getByTestId("approval").waitFor({ state: "visible" });
    assert.equal(await watcher.page.getByTestId("approval-prompt").textContent(), "May I do this: deploy the site?");
    assert.ok(await watcher.page.getByTestId("approve").isHidden(), "an observer has no Approve");
    assert.ok(await watcher.page.getByTestId("deny").isHidden(), "an observer has no Deny");
    await watcher.page.waitForFunction(() => /may not answer/.test(document.querySelector('[data-testid="approval-info"]')?.textContent ?? ""));
    await screenshot(admin.page, "approval-dialog");
    await screenshot(watcher.page, "approval-observer");
    assert.equal(await admin.page.evaluate(() => document.activeElement?.getAttribute("data-testid")), "approve");
    await admin.page.keyboard.press("Enter");
    assert.equal(await result(admin.page, "completed"), "approved: deploy the site");
    await dialog.waitFor({ state: "hidden" });
    // The observer sees the outcome too, and its dialog closes.
    assert.equal(await result(watcher.page, "completed"), "approved: deploy the site");
    await watcher.page.getByTestId("approval").waitFor({ state: "hidden" });
    await watcher.page.waitForFunction(() => /approved by admin/.test(document.querySelector('[data-testid="notice"]')?.textContent ?? ""));

    // Denied, with the mouse.
    await submit(admin.page, "drop the database");
    await dialog.waitFor({ state: "visible" });
    assert.equal(await admin.page.getByTestId("approval-prompt").textContent(), "May I do this: drop the database?");
    await admin.page.getByTestId("deny").click();
    assert.match(await result(admin.page, "failed"), /denied: drop the database/);
    await dialog.waitFor({ state: "hidden" });
    const evs = await events(admin.page);
    const resolved = evs.filter((e) => e.kind === "approval_resolved").map((e) => e.detail);
    assert.deepEqual(resolved, ["approved by admin", "denied by admin"]);

    // An observer is not offered Submit either (its grant has no `submit`), nor the task box.
    await watcher.page.waitForFunction(() => document.querySelector('[data-testid="task-form"]')?.getAttribute("data-submit") === "forbidden");
    assert.ok(await watcher.page.getByTestId("submit").isHidden(), "an observer has no Submit");
    assert.ok(await watcher.page.getByTestId("task").isDisabled(), "an observer's task box is disabled");
    assert.deepEqual(admin.seen.errors, []);
    assert.deepEqual(watcher.seen.errors, []);
    await admin.page.close();
    await watcher.page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("the page offers Submit and Interrupt only as the credential's grant allows: an observer gets neither, a controller and an admin both, a grant with submit alone no Interrupt", async () => {
  const setup = new Setup("grant");
  const creds = setup.credentials();
  const server = await serve(setup, ["--runner", "slow", "--credentials", creds.file]);
  try {
    const pages = {};
    for (const who of ["admin", "operator", "submitter", "watcher"]) {
      pages[who] = await open(browser.context, server.url);
      await connect(pages[who].page, creds[who]);
      await pages[who].page.waitForFunction(() => document.querySelector('[data-testid="status-state"]')?.textContent === "idle");
    }
    const observer = pages.watcher.page;
    // Connected and idle: whatever the page knows by now, an observer's Submit is not offered.
    assert.ok((await observer.getByTestId("submit").isHidden()) || (await observer.getByTestId("submit").isDisabled()), "an observer is offered an enabled Submit");
    // Once the page knows the grant (it says so on the task form), each control is shown or not.
    const known = (page) => page.waitForFunction(() => ["submit", "interrupt"].every((m) => ["allowed", "forbidden"].includes(document.querySelector('[data-testid="task-form"]')?.getAttribute(`data-${m}`) ?? "")));
    for (const { page } of Object.values(pages)) await known(page);
    assert.ok(await observer.getByTestId("submit").isHidden(), "an observer has no Submit");
    assert.ok(await observer.getByTestId("interrupt").isHidden(), "an observer has no Interrupt");
    assert.match(await observer.getByTestId("grant-info").textContent(), /may not submit/);
    for (const who of ["admin", "operator", "submitter"]) {
      assert.ok(await pages[who].page.getByTestId("submit").isVisible(), `${who} has Submit`);
      assert.ok(await pages[who].page.getByTestId("submit").isEnabled(), `${who}'s Submit is enabled while idle`);
    }
    for (const who of ["admin", "operator"]) {
      assert.ok(await pages[who].page.getByTestId("interrupt").isVisible(), `${who} has Interrupt`);
      assert.ok(await pages[who].page.getByTestId("grant-info").isHidden(), `${who} is told of no limit`);
    }
    assert.ok(await pages.submitter.page.getByTestId("interrupt").isHidden(), "a grant without interrupt has no Interrupt");
    assert.match(await pages.submitter.page.getByTestId("grant-info").textContent(), /^This credential may not interrupt turns/);

    // A turn runs: Interrupt is offered to the grants with `interrupt`, never to the observer.
    await submit(pages.admin.page, "a long job");
    for (const { page } of Object.values(pages)) await page.waitForFunction(() => document.querySelector('[data-testid="status-state"]')?.textContent === "running");
    await observer.waitForFunction(() => [...document.querySelectorAll('[data-testid="events"] li')].some((li) => li.getAttribute("data-kind") === "turn_started"));
    assert.ok((await observer.getByTestId("interrupt").isHidden()) || (await observer.getByTestId("interrupt").isDisabled()), "an observer is offered an enabled Interrupt while a turn runs");
    assert.ok(await observer.getByTestId("interrupt").isHidden(), "an observer has no Interrupt while a turn runs");
    assert.ok(await observer.getByTestId("submit").isHidden(), "an observer has no Submit while a turn runs");
    assert.ok(await pages.submitter.page.getByTestId("interrupt").isHidden(), "a grant without interrupt has no Interrupt while a turn runs");
    for (const who of ["admin", "operator"]) {
      await pages[who].page.waitForFunction(() => document.querySelector('[data-testid="interrupt"]')?.disabled === false);
      assert.ok(await pages[who].page.getByTestId("interrupt").isVisible(), `${who} has Interrupt while a turn runs`);
    }
    await screenshot(observer, "observer-controls");
    await pages.admin.page.getByTestId("interrupt").click();
    assert.match(await result(pages.admin.page, "failed"), /^failed \(interrupted\)/);
    for (const { seen } of Object.values(pages)) assert.deepEqual(seen.errors, []);
    for (const { page } of Object.values(pages)) await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("an approval nobody answers times out and is denied; the page shows the time running out", async () => {
  const setup = new Setup("approval-timeout");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "ask", "--token-file", file, "--approval-timeout", "2"]);
  try {
    const { page } = await open(browser.context, server.url);
    await connect(page, token);
    // The dialog is up for the 2 s the runtime waits: polling from here could miss it on a starved
    // machine. The page itself notes every state it shows while the dialog is visible.
    await page.evaluate(() => {
      const dialog = document.querySelector('[data-testid="approval"]');
      const shown = [];
      window.approvalShown = shown;
      new MutationObserver(() => {
        const text = dialog.querySelector('[data-testid="approval-info"]')?.textContent ?? "";
        if (dialog.open && dialog.checkVisibility() && shown.at(-1) !== text) shown.push(text);
      }).observe(dialog, { attributes: true, childList: true, characterData: true, subtree: true });
    });
    await submit(page, "wait for me");
    assert.match(await result(page, "failed"), /denied: wait for me/);
    const shown = await page.evaluate(() => window.approvalShown);
    assert.ok(shown.length > 0, "the approval dialog was never shown");
    assert.ok(shown.some((t) => /^Time left: [12] s$/.test(t)), `the dialog showed no countdown: ${JSON.stringify(shown)}`);
    await page.getByTestId("approval").waitFor({ state: "hidden" });
    const evs = await events(page);
    assert.ok(evs.some((e) => e.kind === "approval_denied" && /no answer within/.test(e.detail)), JSON.stringify(evs));
    assert.ok(!evs.some((e) => e.kind === "approval_resolved"), "the page answered nothing");
    assert.match(await page.getByTestId("notice").textContent(), /approval denied: no answer within/);
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("Interrupt stops a slow turn", async () => {
  const setup = new Setup("interrupt");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "slow", "--token-file", file]);
  try {
    const { page } = await open(browser.context, server.url);
    await connect(page, token);
    await submit(page, "a long job");
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="events"] li .detail')].some((d) => d.textContent === "step 3"));
    await page.waitForFunction(() => document.querySelector('[data-testid="status-state"]')?.textContent === "running");
    assert.ok(await page.getByTestId("submit").isDisabled(), "no second submit while a turn runs");
    await page.getByTestId("interrupt").click();
    assert.match(await result(page, "failed"), /^failed \(interrupted\)/);
    await page.waitForFunction(() => document.querySelector('[data-testid="status-state"]')?.textContent === "idle");
    assert.ok(await page.getByTestId("interrupt").isDisabled());
    const evs = await events(page);
    assert.ok(evs.filter((e) => e.kind === "text").length < 300, "the turn did not run to its end");
    assert.equal(evs.at(-1).kind, "turn_failed");
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("the server restarts on the same port: the page reconnects, shows the gap, then the new events", async () => {
  const setup = new Setup("restart");
  const { token, file } = setup.token();
  const first = await serve(setup, ["--runner", "echo", "--token-file", file]);
  let second;
  try {
    const { page } = await open(browser.context, first.url);
    await connect(page, token);
    // More events than the new runtime will have when the page is back, so the page can tell it restarted.
    await submit(page, "before the restart of the runtime");
    assert.equal(await result(page, "completed"), "before the restart of the runtime");
    await first.stop("SIGINT");
    await page.waitForFunction(() => document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") === "reconnecting");
    second = await serve(setup, ["--runner", "echo", "--token-file", file, "--bind", `127.0.0.1:${first.port}`]);
    assert.equal(second.port, first.port);
    // A turn on the new runtime, run from elsewhere while the page may still be away.
    const r = await rpc(second.url, token, "submit", { task: "while you were away" });
    assert.equal(r.result.result, "while you were away");
    await waitConnected(page);
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="notice"] li')].some((li) => li.getAttribute("data-kind") === "gap"));
    assert.match(await page.getByTestId("notice").textContent(), /gap: the runtime restarted/);
    // The new runtime's events, from its first.
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="events"] li')].some((li) => li.getAttribute("data-kind") === "turn_completed" && li.textContent.includes("while you were away")));
    const evs = await events(page);
    const restartAt = evs.findIndex((e) => e.kind === "shutting_down");
    assert.ok(restartAt > 0, JSON.stringify(evs));
    assert.deepEqual(
      evs.slice(restartAt + 1).map((e) => [e.seq, e.kind]),
      [
        [1, "turn_started"],
        [2, "text"],
        [3, "text"],
        [4, "text"],
        [5, "text"],
        [6, "turn_completed"],
      ],
    );
    // And the page drives the new runtime.
    await submit(page, "after the restart");
    assert.equal(await result(page, "completed"), "after the restart");
    await page.close();
  } finally {
    await first.stop();
    await second?.stop();
    setup.cleanup();
  }
});

test("a runner's text that is HTML renders as text and runs no script", async () => {
  const setup = new Setup("xss");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--runner", "ask", "--token-file", file, "--approval-timeout", "60"]);
  const payload = "<img src=x onerror=alert(1)>";
  try {
    const { page, seen } = await open(browser.context, server.url);
    await connect(page, token);
    await submit(page, payload);
    assert.equal(await result(page, "completed"), payload);
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="events"] li')].some((li) => li.getAttribute("data-kind") === "turn_completed"));
    const evs = await events(page);
    assert.equal(evs.find((e) => e.kind === "turn_completed").detail, payload);
    // An approval prompt carrying HTML is text too.
    await submit(page, `<script>alert(2)</script>${payload}`, "ask");
    await page.getByTestId("approval").waitFor({ state: "visible" });
    assert.equal(await page.getByTestId("approval-prompt").textContent(), `May I do this: <script>alert(2)</script>${payload}?`);
    await page.getByTestId("deny").click();
    await result(page, "failed");
    assert.equal(await page.locator("img").count(), 0, "no <img> element was created");
    assert.equal(await page.locator("body script").count(), 0, "no <script> element was created");
    assert.deepEqual(seen.dialogs, [], "no script ran (no alert)");
    assert.deepEqual(seen.errors, []);
    assert.ok(!seen.requests.some((u) => new URL(u).pathname === "/x"), "the image was never fetched");
    await screenshot(page, "html-as-text");
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

/**
 * The code points a page must never show raw, as `openagents attach` has them (`is_unsafe` in
 * crates/cli/src/attach.rs): controls (C0 but the line feed, DEL, C1) and the characters that
 * reorder or hide text (bidi marks, embeddings, overrides and isolates, zero-width characters,
 * line and paragraph separators, the byte order mark). Returns them as U+XXXX.
 */
function rawUnsafe(text) {
  const bad = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    const unsafe =
      (cp <= 0x1f && cp !== 0x0a) || (cp >= 0x7f && cp <= 0x9f) || cp === 0x061c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp === 0xfeff;
    if (unsafe) bad.push(`U+${cp.toString(16).toUpperCase().padStart(4, "0")}`);
  }
  return bad;
}

test("a runner's control and bidi characters are shown escaped, as attach shows them, and its text is isolated: the approval dialog, the events, the result", async () => {
  const setup = new Setup("spoof");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "ask", "--token-file", file, "--approval-timeout", "60"]);
  // The ask runner asks "May I do this: TASK?" and completes with "approved: TASK". Raw, the
  // override shows "read \u{202e}drowssap/cte/" as "read /etc/password"; ESC [2K, BEL, CR and
  // CSI (U+009B) would be a terminal's; the rest reorder or hide text.
  const task = "read \u202edrowssap/cte/ \u001b[2K\u0007\r\u009b31m \u2066x\u2069 \u200f\u061c\u200b\ufeff\u2028\u007f\t.\nsecond line";
  const escapes = ["\\u{202e}", "\\x1b[2K", "\\x07", "\\r", "\\x9b31m", "\\u{2066}x\\u{2069}", "\\u{200f}\\u{61c}\\u{200b}\\u{feff}\\u{2028}\\x7f\\t."];
  try {
    const { page, seen } = await open(browser.context, server.url);
    await connect(page, token);
    // Submitted from elsewhere (POST /rpc): a textarea would turn the CR into a line feed.
    const submitted = rpc(server.url, token, "submit", { task });
    await page.getByTestId("approval").waitFor({ state: "visible" });
    await page.waitForFunction(() => /drowssap/.test(document.querySelector('[data-testid="approval-prompt"]')?.textContent ?? ""));
    await screenshot(page, "approval-spoofing-prompt");

    const prompt = await page.getByTestId("approval-prompt").textContent();
    assert.deepEqual(rawUnsafe(prompt), [], `the dialog's prompt holds raw characters: ${JSON.stringify(prompt)}`);
    for (const e of escapes) assert.ok(prompt.includes(e), `the dialog's prompt does not show ${e}: ${JSON.stringify(prompt)}`);
    assert.ok(prompt.includes("\\n\nsecond line"), `the dialog's prompt does not mark its line feed: ${JSON.stringify(prompt)}`);
    assert.deepEqual(rawUnsafe(await page.getByTestId("approval").textContent()), [], "the dialog holds raw characters");
    // Shown in the order it was written: the "d" right after the override is left of the last "/".
    const order = await page.evaluate(() => {
      const el = document.querySelector('[data-testid="approval-prompt"]');
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const at = n.data.indexOf("drowssap/cte/");
        if (at < 0) continue;
        const x = (i) => {
          const r = document.createRange();
          r.setStart(n, i);
          r.setEnd(n, i + 1);
          return r.getBoundingClientRect().left;
        };
        return { d: x(at), slash: x(at + "drowssap/cte".length) };
      }
      return null;
    });
    assert.ok(order !== null, "no text node holds the prompt's path");
    assert.ok(order.d < order.slash, `the path is shown reordered (the "d" at x=${order.d}, its last "/" at x=${order.slash})`);
    // Runner text is isolated, left to right, from what surrounds it.
    const style = await page.evaluate(() => {
      const s = getComputedStyle(document.querySelector('[data-testid="approval-prompt"]'));
      return { bidi: s.unicodeBidi, direction: s.direction };
    });
    assert.ok(["isolate", "plaintext"].includes(style.bidi), `the prompt's unicode-bidi is ${style.bidi}`);
    assert.equal(style.direction, "ltr");

    await page.getByTestId("approve").click();
    const answer = await submitted;
    assert.equal(answer.result?.result, `approved: ${task}`, "the runtime carried the characters raw (the test's input is real)");
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="events"] li')].some((li) => li.getAttribute("data-kind") === "turn_completed"));
    await page.waitForFunction(() => document.querySelector('[data-testid="result"]')?.getAttribute("data-outcome") === "completed");

    const resultText = await page.getByTestId("result").textContent();
    assert.deepEqual(rawUnsafe(resultText), [], `the result holds raw characters: ${JSON.stringify(resultText)}`);
    for (const e of escapes) assert.ok(resultText.includes(e), `the result does not show ${e}: ${JSON.stringify(resultText)}`);
    const resultStyle = await page.evaluate(() => getComputedStyle(document.querySelector('[data-testid="result"]')).unicodeBidi);
    assert.ok(["isolate", "plaintext"].includes(resultStyle), `the result's unicode-bidi is ${resultStyle}`);

    const evs = await events(page);
    for (const kind of ["approval_requested", "turn_completed"]) {
      const detail = evs.find((e) => e.kind === kind)?.detail ?? "";
      for (const e of escapes) assert.ok(detail.includes(e), `the ${kind} event does not show ${e}: ${JSON.stringify(detail)}`);
    }
    const list = await page.getByTestId("events").textContent();
    assert.deepEqual(rawUnsafe(list), [], `the events list holds raw characters: ${JSON.stringify(list)}`);
    const detailStyle = await page.evaluate(() => getComputedStyle(document.querySelector('[data-testid="events"] li[data-kind="turn_completed"] .detail')).unicodeBidi);
    assert.ok(["isolate", "plaintext"].includes(detailStyle), `an event's unicode-bidi is ${detailStyle}`);
    // Nowhere on the page, either.
    assert.deepEqual(rawUnsafe(await page.evaluate(() => document.body.textContent)), [], "the page holds raw characters");
    assert.deepEqual(seen.errors, []);
    await screenshot(page, "spoofing-escaped");
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("a page that is not a secure context (plain HTTP, not loopback) runs turns; a page from another origin cannot open the WebSocket", async () => {
  // The page's host name is one the operator lets the runtime answer to (DNS rebinding: any
  // other name gets 421); evil.test is not, and its page is another origin either way.
  const setup = new Setup("insecure", 'allowed_hosts = ["openagents.test"]\n');
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file]);
  try {
    const url = `http://openagents.test:${server.port}/`;
    const { page, seen } = await open(browser.context, url);
    assert.equal(await page.evaluate(() => window.isSecureContext), false);
    assert.equal(await page.evaluate(() => typeof crypto.randomUUID), "undefined", "no randomUUID outside a secure context");
    await connect(page, token);
    await submit(page, "from an insecure page");
    assert.equal(await result(page, "completed"), "from an insecure page");
    assert.deepEqual(seen.errors, []);
    // Another origin (a page on evil.test, same port) offering a valid token: refused before the upgrade.
    const other = await browser.context.newPage();
    await other.goto(`http://evil.test:${server.port}/healthz`);
    const outcome = await other.evaluate(
      ([ws, t]) =>
        new Promise((resolve) => {
          const s = new WebSocket(ws, ["openagents.v2", `openagents.bearer.${t}`]);
          s.onopen = () => resolve("open");
          s.onclose = (e) => resolve(`closed ${e.code}`);
        }),
      [`ws://openagents.test:${server.port}/frontend/v2`, token],
    );
    assert.equal(outcome, "closed 1006", "the Origin check refuses another origin's page");
    // The same token from the page's own origin opens it.
    const own = await page.evaluate(
      ([ws, t]) =>
        new Promise((resolve) => {
          const s = new WebSocket(ws, ["openagents.v2", `openagents.bearer.${t}`]);
          s.onopen = () => {
            resolve(`open ${s.protocol}`);
            s.close();
          };
          s.onclose = (e) => resolve(`closed ${e.code}`);
        }),
      [`ws://openagents.test:${server.port}/frontend/v2`, token],
    );
    assert.equal(own, "open openagents.v2");
    await other.close();
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("a page that comes back after more events than the runtime holds shows the gap, then the events still held", async () => {
  const setup = new Setup("gap");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file]);
  try {
    const { page } = await open(browser.context, server.url);
    await connect(page, token);
    await submit(page, "first turn");
    assert.equal(await result(page, "completed"), "first turn");
    await page.waitForFunction(() => document.querySelector('[data-testid="status-seq"]')?.textContent === "4");
    // Away (the socket closes), while a turn publishes more events than the runtime's replay buffer holds (1024).
    await page.goto("about:blank");
    const words = Array.from({ length: 1100 }, (_, i) => `w${i + 1}`).join(" ");
    const r = await rpc(server.url, token, "submit", { task: words });
    assert.equal(r.result.result, words);
    const last = 4 + 1 + 1100 + 1;
    // Back in the same tab: the token and the resume point come from sessionStorage.
    await page.goto(server.url);
    await waitConnected(page);
    await page.waitForFunction((n) => document.querySelector('[data-testid="status-seq"]')?.textContent === String(n), last);
    const notices = await page.$$eval('[data-testid="notice"] li', (lis) => lis.map((li) => [li.getAttribute("data-kind"), li.textContent]));
    const gap = notices.filter(([kind]) => kind === "gap");
    assert.equal(gap.length, 1, JSON.stringify(notices));
    assert.match(gap[0][1], new RegExp(`gap: events after 4 up to ${last - 1024} are no longer held by the runtime`));
    // The list keeps the newest 1000 events: the end of the 1024 still held, once each, in order.
    const evs = await events(page);
    assert.deepEqual(
      evs.map((e) => e.seq),
      Array.from({ length: 1000 }, (_, i) => last - 999 + i),
    );
    assert.equal(evs.at(-1).kind, "turn_completed");
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

/** The history list as [[id, turns], …], top to bottom. */
function listed(page) {
  return page.$$eval('[data-testid="conversations"] li', (lis) => lis.map((li) => [li.getAttribute("data-id"), Number(li.getAttribute("data-turns"))]));
}

/** Waits until the history list is `expected` ([[id, turns], …], newest first). */
async function waitListed(page, expected) {
  try {
    await page.waitForFunction(
      (want) => JSON.stringify([...document.querySelectorAll('[data-testid="conversations"] li')].map((li) => [li.getAttribute("data-id"), Number(li.getAttribute("data-turns"))])) === want,
      JSON.stringify(expected),
    );
  } catch (e) {
    throw new Error(`the history list is ${JSON.stringify(await listed(page))}, not ${JSON.stringify(expected)}: ${e}`);
  }
}

/** The transcript as [[task, answer, outcome], …], oldest first. */
function transcript(page) {
  return page.$$eval('[data-testid="transcript"] li', (lis) =>
    lis.map((li) => [li.querySelector(".message.task .text")?.textContent, li.querySelector(".message.answer .text")?.textContent, li.getAttribute("data-outcome")]),
  );
}

/** Waits until the transcript is `expected` ([[task, answer, outcome], …]). */
async function waitTranscript(page, expected) {
  try {
    await page.waitForFunction(
      (want) =>
        JSON.stringify(
          [...document.querySelectorAll('[data-testid="transcript"] li')].map((li) => [
            li.querySelector(".message.task .text")?.textContent,
            li.querySelector(".message.answer .text")?.textContent,
            li.getAttribute("data-outcome"),
          ]),
        ) === want,
      JSON.stringify(expected),
    );
  } catch (e) {
    throw new Error(`the transcript is ${JSON.stringify(await transcript(page))}, not ${JSON.stringify(expected)}: ${e}`);
  }
}

/** The conversation the list marks as chosen. */
function current(page) {
  return page.$$eval('[data-testid="conversations"] button[aria-current="true"]', (bs) => bs.map((b) => b.getAttribute("data-id")));
}

test("history: the page lists the stored conversations, shows the chosen one's transcript, continues it, and shows it again after a reload and a restart", async () => {
  const setup = new Setup("history");
  const { token, file } = setup.token();
  // History needs a store that outlives the process, whatever OPENAGENTS_STORE says (the flag wins).
  const args = ["--runner", "echo", "--token-file", file, "--store", `sqlite:${join(setup.dir, "history.db")}`];
  const first = await serve(setup, args);
  let second;
  try {
    // An older conversation whose title is HTML and a bidi override, then two turns of one conversation, from another client.
    const odd = (await rpc(first.url, token, "submit", { task: "<b>bold</b> \u202eabc" })).result.conversation;
    const one = await rpc(first.url, token, "submit", { task: "first task" });
    const id = one.result.conversation;
    const two = await rpc(first.url, token, "submit", { task: "second task", conversation: id });
    assert.equal(two.result.conversation, id);

    const { page, seen } = await open(browser.context, first.url);
    await connect(page, token);
    await waitListed(page, [[id, 2], [odd, 1]]);
    const items = page.getByTestId("conversations").getByRole("button");
    assert.match(await items.nth(0).textContent(), /^first task\s*echo · 2 turns · /);
    assert.match(await items.nth(1).textContent(), /^<b>bold<\/b> \\u\{202e\}abc\s*echo · 1 turn · /);
    assert.equal(await page.locator('[data-testid="conversations"] b').count(), 0, "a title is text, never HTML");
    assert.ok(await page.getByTestId("conversations-more").isHidden(), "one page: no More");
    assert.deepEqual(await transcript(page), [], "nothing chosen yet");
    assert.match(await page.getByTestId("task-conversation").textContent(), /starts a new conversation/);

    // Chosen: both tasks and results, oldest first; the URL names it.
    await items.nth(0).click();
    await waitTranscript(page, [["first task", "first task", "completed"], ["second task", "second task", "completed"]]);
    assert.equal(new URL(page.url()).hash, `#conversation=${id}`);
    assert.deepEqual(await current(page), [id]);
    assert.match(await page.getByTestId("transcript-info").textContent(), /^“first task” on echo · 2 turns · id /);
    assert.match(await page.getByTestId("task-conversation").textContent(), /continues the conversation “first task” on echo\./);

    // A reload shows the list and, as the URL names it, the transcript again.
    await page.reload();
    await waitConnected(page);
    await waitListed(page, [[id, 2], [odd, 1]]);
    await waitTranscript(page, [["first task", "first task", "completed"], ["second task", "second task", "completed"]]);
    assert.deepEqual(await current(page), [id]);

    // A third turn from the page continues the same conversation.
    await submit(page, "third task");
    assert.equal(await result(page, "completed"), "third task");
    await waitListed(page, [[id, 3], [odd, 1]]);
    await waitTranscript(page, [["first task", "first task", "completed"], ["second task", "second task", "completed"], ["third task", "third task", "completed"]]);
    const stored = await rpc(first.url, token, "conversation", { id });
    assert.deepEqual(stored.result.turns.map((t) => t.task), ["first task", "second task", "third task"]);
    assert.match(stored.result.turns[2].assignment, /^web-/, "the third turn is the page's");
    await screenshot(page, "history");

    // New conversation: the next task starts one, which is then chosen and named in the URL.
    await page.getByTestId("new-conversation").click();
    assert.equal(new URL(page.url()).hash, "");
    assert.deepEqual(await current(page), []);
    await submit(page, "a fresh start");
    assert.equal(await result(page, "completed"), "a fresh start");
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversations"] li').length === 3);
    const [[fresh, freshTurns], ...rest] = await listed(page);
    assert.deepEqual([freshTurns, rest], [1, [[id, 3], [odd, 1]]]);
    await waitTranscript(page, [["a fresh start", "a fresh start", "completed"]]);
    assert.deepEqual(await current(page), [fresh]);
    assert.equal(new URL(page.url()).hash, `#conversation=${fresh}`);

    // The runtime restarts on the same store: a reload shows what was there.
    await first.stop();
    second = await serve(setup, [...args, "--bind", `127.0.0.1:${first.port}`]);
    await page.reload();
    await waitConnected(page);
    await waitListed(page, [[fresh, 1], [id, 3], [odd, 1]]);
    await waitTranscript(page, [["a fresh start", "a fresh start", "completed"]]);
    await page.getByTestId("conversations").getByRole("button").nth(1).click();
    await waitTranscript(page, [["first task", "first task", "completed"], ["second task", "second task", "completed"], ["third task", "third task", "completed"]]);
    assert.deepEqual(seen.errors, []);
    assert.deepEqual(seen.dialogs, []);
    await page.close();
  } finally {
    await first.stop();
    await second?.stop();
    setup.cleanup();
  }
});

test("history pages with More: the list past its first 20 conversations, the transcript past its first 20 turns", async () => {
  const setup = new Setup("history-pages");
  const { token, file } = setup.token();
  const server = await serve(setup, ["--runner", "echo", "--token-file", file, "--store", `sqlite:${join(setup.dir, "history.db")}`]);
  try {
    // One long conversation (22 turns), then 21 short ones: 22 conversations, the long one last.
    const long = (await rpc(server.url, token, "submit", { task: "turn 1" })).result.conversation;
    for (let i = 2; i <= 22; i++) assert.equal((await rpc(server.url, token, "submit", { task: `turn ${i}`, conversation: long })).result.conversation, long);
    for (let i = 1; i <= 21; i++) await rpc(server.url, token, "submit", { task: `short ${i}` });
    const { page, seen } = await open(browser.context, server.url);
    await connect(page, token);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversations"] li').length === 20);
    assert.ok(await page.getByTestId("conversations-more").isVisible());
    await page.getByTestId("conversations-more").click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="conversations"] li').length === 22);
    assert.ok(await page.getByTestId("conversations-more").isHidden(), "the last page: no More");
    const all = await listed(page);
    assert.equal(new Set(all.map(([i]) => i)).size, 22, "each conversation once");
    assert.deepEqual(all.at(-1), [long, 22], "the least recently updated last");
    assert.match(await page.getByTestId("conversations").getByRole("button").nth(0).textContent(), /^short 21/);

    await page.getByTestId("conversations").getByRole("button").last().click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="transcript"] li').length === 20);
    assert.deepEqual((await transcript(page)).map(([t]) => t), Array.from({ length: 20 }, (_, i) => `turn ${i + 1}`));
    await page.getByTestId("transcript-more").click();
    await waitTranscript(page, Array.from({ length: 22 }, (_, i) => [`turn ${i + 1}`, `turn ${i + 1}`, "completed"]));
    assert.ok(await page.getByTestId("transcript-more").isHidden());
    // A turn on it from the page: the refreshed transcript keeps every turn shown, and the new one.
    await submit(page, "turn 23");
    assert.equal(await result(page, "completed"), "turn 23");
    await waitTranscript(page, Array.from({ length: 23 }, (_, i) => [`turn ${i + 1}`, `turn ${i + 1}`, "completed"]));
    assert.deepEqual((await listed(page))[0], [long, 23], "it moved to the front");
    assert.deepEqual(seen.errors, []);
    await page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});

test("history and grants: a credential that may not read events is told so instead of the panel; an observer reads it but is not offered to continue", async () => {
  const setup = new Setup("history-grant");
  const creds = setup.credentials();
  const server = await serve(setup, ["--runner", "echo", "--credentials", creds.file, "--store", `sqlite:${join(setup.dir, "history.db")}`]);
  try {
    const id = (await rpc(server.url, creds.admin, "submit", { task: "the secret plan" })).result.conversation;
    // The runtime refuses it the history, whatever the page shows.
    const refused = await rpc(server.url, creds.blind, "conversations");
    assert.equal(refused.error?.data?.code ?? refused.error?.code, "forbidden", JSON.stringify(refused));

    const blind = await open(browser.context, `${server.url}#conversation=${id}`);
    await connect(blind.page, creds.blind);
    await blind.page.waitForFunction(() => document.querySelector('[data-testid="history-info"]')?.getAttribute("data-access") === "forbidden");
    assert.equal(
      await blind.page.getByTestId("history-info").textContent(),
      "This credential may not read the history (the conversations and their turns): its grant does not allow reading events.",
    );
    assert.ok(await blind.page.getByTestId("history-info").isVisible());
    assert.ok(await blind.page.getByTestId("history").isHidden(), "no panel");
    assert.ok(await blind.page.getByTestId("task-conversation").isHidden(), "no word of continuing a conversation it cannot read");
    assert.ok(!(await blind.page.content()).includes("the secret plan"), "nothing of the history on the page");
    await screenshot(blind.page, "history-forbidden");

    // An observer reads the history, and has nothing to continue it with. The URL names a
    // conversation the store does not hold: the page says so, and lists what it holds.
    const watcher = await open(browser.context, `${server.url}#conversation=no-such-conversation`);
    await connect(watcher.page, creds.watcher);
    await waitListed(watcher.page, [[id, 1]]);
    await watcher.page.waitForFunction(() => /^The runtime keeps no conversation no-such-conversation: /.test(document.querySelector('[data-testid="transcript-info"]')?.textContent ?? ""));
    assert.deepEqual(await transcript(watcher.page), []);
    await watcher.page.getByTestId("conversations").getByRole("button").first().click();
    await waitTranscript(watcher.page, [["the secret plan", "the secret plan", "completed"]]);
    await watcher.page.waitForFunction(() => document.querySelector('[data-testid="task-form"]')?.getAttribute("data-submit") === "forbidden");
    assert.ok(await watcher.page.getByTestId("task-conversation").isHidden());
    assert.deepEqual(blind.seen.errors, []);
    assert.deepEqual(watcher.seen.errors, []);
    await blind.page.close();
    await watcher.page.close();
  } finally {
    await server.stop();
    setup.cleanup();
  }
});
