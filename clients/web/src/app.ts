/**
 * The web page `openagents serve --http` serves on `GET /`: a frontend for `/frontend/v2`, on
 * the TypeScript client's browser WebSocket transport.
 *
 * - The token comes from the password field or the URL fragment `#token=…` (never sent to the
 *   server; removed from the address bar at once), is kept in `sessionStorage` only, and goes
 *   out only inside the WebSocket handshake (the `openagents.bearer.<token>` subprotocol). It is
 *   never put in a URL, a log or the page.
 * - Everything a runner or client sends is shown as text (text nodes), never as HTML, and as
 *   `openagents attach` shows it: control characters (C0, DEL, C1) and the characters that
 *   reorder or hide text (bidi marks, embeddings, overrides and isolates, zero-width characters)
 *   appear as visible escapes in attach's notation (`\x1b`, `\r`, `\u{202e}`), each a marked
 *   element of its own, and the text sits in a left-to-right isolate (`<bdi dir="ltr">` or an
 *   element with `dir="ltr"` and `unicode-bidi: isolate`), so nothing it holds can reorder,
 *   hide or restyle what is around it or itself.
 * - A dropped connection is reconnected with backoff and resumes from the last `seq`; `lagged`
 *   and `gap` are shown as notices, as is a runtime that restarted (its sequence went back).
 * - Approval requests open a dialog with the prompt's full text, Approve / Deny and the time
 *   left; when it runs out the page sends nothing and the runtime denies (approvals fail closed).
 * - Submit and Interrupt are offered only as the credential's grant allows, as `status` tells
 *   it (`caller`); until the first answer on a connection, both are disabled.
 */

import { OpenAgentsClient } from "../../typescript/src/client.js";
import { OpenAgentsError } from "../../typescript/src/error.js";
import type { ApprovalPrompt, RuntimeStatus, ServerEvent } from "../../typescript/src/generated/types.js";
import { isKnownRuntimeEvent } from "../../typescript/src/generated/types.js";
import type { ApprovalContext } from "../../typescript/src/websocket.js";
import { WebSocketClosedError, WebSocketTransport } from "../../typescript/src/websocket.js";

/** Where the token is kept: this tab's `sessionStorage`, under this key. */
const TOKEN_KEY = "openagents.token";
/** Where the resume point is kept (this tab's `sessionStorage`), so a reload resumes from it. */
const SEQ_KEY = "openagents.last_seq";
/** How many events the list keeps. */
const MAX_EVENTS = 1000;
/** How many notices the list keeps. */
const MAX_NOTICES = 100;
/** Reconnect delays, in milliseconds (the last one repeats). */
const BACKOFF_MS = [250, 500, 1000, 2000, 4000];
/** How often the status is refreshed while connected. */
const STATUS_REFRESH_MS = 5000;
/** How long an approval seen only as an event waits for its request before the page says this credential may not answer. */
const ANSWERER_GRACE_MS = 1000;

function byId<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

const ui = {
  connection: byId<HTMLParagraphElement>("connection"),
  connectForm: byId<HTMLFormElement>("connect-form"),
  token: byId<HTMLInputElement>("token"),
  forget: byId<HTMLButtonElement>("forget"),
  statusConnection: byId("status-connection"),
  statusState: byId("status-state"),
  statusRunner: byId("status-runner"),
  statusLease: byId("status-lease"),
  statusProtocol: byId("status-protocol"),
  statusSeq: byId("status-seq"),
  taskForm: byId<HTMLFormElement>("task-form"),
  task: byId<HTMLTextAreaElement>("task"),
  runner: byId<HTMLInputElement>("runner"),
  submit: byId<HTMLButtonElement>("submit"),
  interrupt: byId<HTMLButtonElement>("interrupt"),
  grantInfo: byId<HTMLParagraphElement>("grant-info"),
  result: byId<HTMLPreElement>("result"),
  progress: byId<HTMLParagraphElement>("progress"),
  notices: byId<HTMLUListElement>("notice"),
  events: byId<HTMLOListElement>("events"),
  approval: byId<HTMLDialogElement>("approval"),
  approvalPrompt: byId("approval-prompt"),
  approvalInfo: byId("approval-info"),
  approve: byId<HTMLButtonElement>("approve"),
  deny: byId<HTMLButtonElement>("deny"),
};

/** A random id from `crypto.getRandomValues` (available on every page, secure or not). */
function randomId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function message(e: unknown): string {
  if (e instanceof OpenAgentsError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

// ---- text from elsewhere: escaped as attach escapes it, and isolated ----------------------

/**
 * Whether a UTF-16 code unit must not be shown raw — `openagents attach`'s rule (`is_unsafe` in
 * crates/cli/src/attach.rs): a control character (C0, DEL, C1), or one that reorders or hides
 * text (U+061C, U+200B–U+200F, U+2028–U+202E, U+2060–U+2069, U+FEFF). All of them are in the
 * Basic Multilingual Plane and none is a surrogate, so code units are enough.
 */
function isUnsafe(c: number): boolean {
  return c <= 0x1f || (c >= 0x7f && c <= 0x9f) || c === 0x061c || (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x2069) || c === 0xfeff;
}

/** attach's notation for an unsafe character: `\n`, `\r`, `\t`, `\x1b` below U+0100, `\u{202e}` above. */
function escapeOf(c: number): string {
  if (c === 0x0a) return "\\n";
  if (c === 0x0d) return "\\r";
  if (c === 0x09) return "\\t";
  return c < 0x100 ? `\\x${c.toString(16).padStart(2, "0")}` : `\\u{${c.toString(16)}}`;
}

/**
 * Appends `text` to `parent` as text nodes, every unsafe character replaced by a marker (a
 * `<span class="escape">` holding its escape, set apart by its style, so a backslash the text
 * itself holds is never mistaken for one). A line feed stays a line break; with `markNewlines`
 * (the approval prompt) its `\n` is shown before the break, so no line of it goes unnoticed.
 */
function appendEscaped(parent: Node, text: string, markNewlines = false): void {
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (!isUnsafe(c) || (c === 0x0a && !markNewlines)) continue;
    if (i > start) parent.appendChild(document.createTextNode(text.slice(start, i)));
    const mark = document.createElement("span");
    mark.className = "escape";
    mark.title = `U+${c.toString(16).toUpperCase().padStart(4, "0")}, shown escaped`;
    mark.textContent = escapeOf(c);
    parent.appendChild(mark);
    if (c === 0x0a) parent.appendChild(document.createTextNode("\n"));
    start = i + 1;
  }
  if (start < text.length) parent.appendChild(document.createTextNode(start === 0 ? text : text.slice(start)));
}

/** Text that came from a runner, a client or the runtime: shown escaped, in an isolate of its own. */
class Foreign {
  constructor(readonly text: string) {}
}

/** `value` as foreign text. */
function foreign(value: unknown): Foreign {
  return new Foreign(String(value));
}

/** The page's own words (a string) and foreign text, in order. */
type Part = string | Foreign;

/** A left-to-right isolate holding `text`, escaped. */
function isolate(text: string): HTMLElement {
  const bdi = document.createElement("bdi");
  bdi.dir = "ltr";
  bdi.className = "foreign";
  appendEscaped(bdi, text);
  return bdi;
}

function appendParts(el: HTMLElement, parts: readonly Part[]): void {
  for (const p of parts) el.append(typeof p === "string" ? p : isolate(p.text));
}

/** Replaces what `el` shows with `parts`. */
function show(el: HTMLElement, ...parts: Part[]): void {
  el.replaceChildren();
  appendParts(el, parts);
}

// ---- notices, events, result --------------------------------------------------------------

function notice(kind: string, ...parts: Part[]): void {
  const li = document.createElement("li");
  li.dataset.kind = kind;
  appendParts(li, [`${new Date().toLocaleTimeString()} `, ...parts]);
  ui.notices.prepend(li);
  while (ui.notices.childElementCount > MAX_NOTICES) ui.notices.lastElementChild?.remove();
}

function eventDetail(ev: ServerEvent): Part[] {
  const e = ev.event;
  if (!isKnownRuntimeEvent(e)) return [foreign(JSON.stringify(e))];
  switch (e.type) {
    case "turn_started":
      return [foreign(e.assignment), " on ", foreign(e.runner)];
    case "text":
      return [foreign(e.text)];
    case "turn_completed":
      return [foreign(e.result)];
    case "turn_failed": {
      const err = e.error as { code?: unknown; message?: unknown };
      return [foreign(err.code), ": ", foreign(err.message)];
    }
    case "approval_requested":
      return [foreign(e.prompt)];
    case "approval_resolved":
      return [`${e.approved === true ? "approved" : "denied"} by `, foreign(e.by)];
    case "approval_denied":
      return [foreign(e.reason)];
    case "lagged":
      return [`missed ${String(e.missed)} events`];
    case "gap":
      return [`events after ${String(e.since)} up to ${String(e.resumed_at)} are lost`];
    case "shutting_down":
      return ["the runtime is shutting down"];
    default:
      return [foreign(JSON.stringify(e))];
  }
}

function listEvent(ev: ServerEvent): void {
  const li = document.createElement("li");
  li.dataset.kind = String(ev.event.type);
  li.dataset.seq = String(ev.seq);
  const seq = document.createElement("span");
  seq.className = "seq";
  seq.textContent = String(ev.seq);
  const kind = document.createElement("span");
  kind.className = "kind";
  appendEscaped(kind, String(ev.event.type));
  const detail = document.createElement("span");
  detail.className = "detail foreign";
  detail.dir = "ltr";
  show(detail, ...eventDetail(ev));
  li.append(seq, kind, detail);
  const atBottom = ui.events.scrollTop + ui.events.clientHeight >= ui.events.scrollHeight - 4;
  ui.events.append(li);
  while (ui.events.childElementCount > MAX_EVENTS) ui.events.firstElementChild?.remove();
  if (atBottom) ui.events.scrollTop = ui.events.scrollHeight;
}

function showResult(outcome: "running" | "completed" | "failed", ...parts: Part[]): void {
  ui.result.dataset.outcome = outcome;
  show(ui.result, ...parts);
}

/** Adds a `text` event's text to the progress line (one isolate: the whole line is the runner's). */
function addProgress(text: string): void {
  if (ui.progress.hasChildNodes()) ui.progress.append(" ");
  appendEscaped(ui.progress, text);
}

// ---- connection ---------------------------------------------------------------------------

let client: OpenAgentsClient | null = null;
let transport: WebSocketTransport | null = null;
/** Bumped by every connect and disconnect: callbacks of an older connection do nothing. */
let generation = 0;
/** The newest sequence number this page has seen (resume point), kept across reloads of this tab. */
let lastSeq: number | null = storedSeq();
/** Whether the current token has opened a connection (a token that never did is not retried). */
let everOpened = false;
let attempt = 0;
let retryTimer: ReturnType<typeof setTimeout> | undefined;
let statusTimer: ReturnType<typeof setInterval> | undefined;
/** The turn this page sees running (from `turn_started` to its end), and the one it submitted. */
let runningAssignment: string | null = null;
let submitting = false;

/** Whether this page's credential may call a method: as `status` said (`learnGrant`), `unknown` before. */
type Permission = "unknown" | "allowed" | "forbidden";
/** What the current token may call; kept across reconnects of the same token (each asks again). */
const may: { submit: Permission; interrupt: Permission } = { submit: "unknown", interrupt: "unknown" };

/** A new token (or none): nothing is known of its grant. */
function forgetGrant(): void {
  may.submit = "unknown";
  may.interrupt = "unknown";
}

function setConnection(state: "idle" | "connecting" | "connected" | "reconnecting" | "failed", ...parts: Part[]): void {
  ui.connection.dataset.state = state;
  show(ui.connection, ...parts);
  show(ui.statusConnection, ...parts);
  updateControls();
}

function updateControls(): void {
  const connected = ui.connection.dataset.state === "connected";
  // A control the grant does not allow is not offered; one not known yet is offered disabled.
  ui.submit.hidden = may.submit === "forbidden";
  ui.interrupt.hidden = may.interrupt === "forbidden";
  ui.task.disabled = may.submit === "forbidden";
  ui.runner.disabled = may.submit === "forbidden";
  ui.submit.disabled = !connected || may.submit !== "allowed" || submitting || runningAssignment !== null;
  ui.interrupt.disabled = !connected || may.interrupt !== "allowed" || (runningAssignment === null && !submitting);
  ui.taskForm.dataset.submit = may.submit;
  ui.taskForm.dataset.interrupt = may.interrupt;
  const denied = [may.submit === "forbidden" ? "submit" : null, may.interrupt === "forbidden" ? "interrupt" : null].filter((m) => m !== null);
  ui.grantInfo.hidden = denied.length === 0;
  ui.grantInfo.textContent =
    denied.length === 0 ? "" : `This credential may not ${denied.join(" or ")} turns: its grant does not allow it.`;
}

/**
 * Learns what this connection's credential may call from `status`, whose answer names the
 * caller and its grant (`caller`), then shows the controls so. A runtime that does not say
 * (one older than the `caller` member) gets both controls offered: the runtime still decides
 * every real call. No answer (the connection dropped) leaves what is known; the next connection
 * asks again.
 */
async function learnGrant(t: WebSocketTransport, gen: number): Promise<void> {
  let methods: unknown;
  try {
    const reply = (await t.request("status", undefined)) as { result?: { caller?: { methods?: unknown } } } | null;
    methods = reply?.result?.caller?.methods;
  } catch {
    return;
  }
  if (gen !== generation) return;
  const allowed = (method: string): Permission => (!Array.isArray(methods) || methods.includes(method) ? "allowed" : "forbidden");
  may.submit = allowed("submit");
  may.interrupt = allowed("interrupt");
  updateControls();
}

function storedSeq(): number | null {
  try {
    const v = Number(sessionStorage.getItem(SEQ_KEY) ?? "");
    return Number.isSafeInteger(v) && v > 0 ? v : null;
  } catch {
    return null;
  }
}

function setLastSeq(seq: number | null): void {
  lastSeq = seq;
  ui.statusSeq.textContent = seq === null ? "none" : String(seq);
  try {
    if (seq === null) sessionStorage.removeItem(SEQ_KEY);
    else sessionStorage.setItem(SEQ_KEY, String(seq));
  } catch {
    // Not kept: a reload then starts at the next new event.
  }
}

function storedToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function storeToken(token: string | null): void {
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // Storage refused (a private window's quota, say): the token then lives in memory only.
  }
}

/** The token in the URL fragment `#token=…`, removed from the address bar and history. */
function tokenFromFragment(): string | null {
  if (!location.hash.startsWith("#")) return null;
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token === null) return null;
  history.replaceState(null, "", location.pathname + location.search);
  return token.trim() === "" ? null : token.trim();
}

function disconnect(): void {
  generation++;
  clearTimeout(retryTimer);
  clearInterval(statusTimer);
  const t = transport;
  transport = null;
  client = null;
  if (t) void t.close();
  closeAllApprovals();
}

function scheduleReconnect(token: string, why: string): void {
  const delay = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)] ?? 4000;
  attempt++;
  setConnection("reconnecting", `reconnecting in ${(delay / 1000).toFixed(1)} s (attempt ${attempt}): `, foreign(why));
  const gen = generation;
  retryTimer = setTimeout(() => {
    if (gen === generation) void connect(token);
  }, delay);
}

async function connect(token: string): Promise<void> {
  disconnect();
  const gen = generation;
  setConnection("connecting", "connecting…");
  let t: WebSocketTransport;
  try {
    t = new WebSocketTransport({ url: new URL("/", location.href), token, onApproval: askPerson });
  } catch (e) {
    setConnection("failed", "cannot connect: ", foreign(message(e)));
    return;
  }
  const c = new OpenAgentsClient(t, { onSchemaMismatch: (m) => notice("error", foreign(m.message)) });
  transport = t;
  client = c;
  try {
    await t.ready();
  } catch (e) {
    if (gen !== generation) return;
    if (everOpened) scheduleReconnect(token, message(e));
    else setConnection("failed", "cannot connect: the token is not valid, or the runtime is unreachable");
    return;
  }
  if (gen !== generation) return;
  everOpened = true;
  attempt = 0;
  setConnection("connected", "connected");
  void learnGrant(t, gen);
  void t.closed.then((e) => {
    if (gen !== generation) return;
    closeAllApprovals();
    runningAssignment = null;
    submitting = false;
    scheduleReconnect(token, message(e));
  });
  let status: RuntimeStatus;
  try {
    status = await c.status();
  } catch (e) {
    if (gen === generation) notice("error", "status: ", foreign(message(e)));
    return;
  }
  if (gen !== generation) return;
  if (lastSeq !== null && status.last_seq < lastSeq) {
    notice("gap", `gap: the runtime restarted (its newest event is ${status.last_seq}, this page had seen ${lastSeq}); events it did not deliver are lost`);
    setLastSeq(0);
  }
  const since = lastSeq ?? status.last_seq;
  setLastSeq(since);
  renderStatus(status);
  const stream = c.events({ since });
  statusTimer = setInterval(() => void refreshStatus(gen), STATUS_REFRESH_MS);
  try {
    for await (const ev of stream) {
      if (gen !== generation) break;
      onEvent(ev, gen);
    }
  } catch (e) {
    // A closed socket is reported (and reconnected) by the close handler.
    if (gen === generation && !(e instanceof WebSocketClosedError)) notice("error", "events: ", foreign(message(e)));
  }
}

function renderStatus(s: RuntimeStatus): void {
  show(ui.statusState, foreign(s.state));
  if (s.active_turn) show(ui.statusRunner, foreign(s.active_turn.runner), " (turn ", foreign(s.active_turn.assignment), ")");
  else show(ui.statusRunner, "none running");
  if (s.lease) show(ui.statusLease, foreign(s.lease.holder), `, until ${new Date(s.lease.expires_at_ms).toLocaleTimeString()}`);
  else show(ui.statusLease, "free");
  const digest: Part[] = s.schema_digest ? [" (schema ", foreign(s.schema_digest.slice(0, 12)), ")"] : [];
  show(ui.statusProtocol, foreign(s.protocol_version ?? "unknown"), ...digest);
  if (s.state !== "running" && !submitting) runningAssignment = null;
  if (s.active_turn && runningAssignment === null) runningAssignment = s.active_turn.assignment;
  updateControls();
}

async function refreshStatus(gen: number): Promise<void> {
  const c = client;
  if (!c || gen !== generation) return;
  try {
    const s = await c.status();
    if (gen === generation) renderStatus(s);
  } catch {
    // The connection's own close handler reports a dropped socket.
  }
}

function onEvent(ev: ServerEvent, gen: number): void {
  const e = ev.event;
  if (e.type !== "lagged" && e.type !== "gap") {
    setLastSeq(Math.max(lastSeq ?? 0, ev.seq));
  }
  listEvent(ev);
  if (!isKnownRuntimeEvent(e)) return;
  switch (e.type) {
    case "turn_started":
      runningAssignment = String(e.assignment);
      ui.progress.replaceChildren();
      showResult("running");
      void refreshStatus(gen);
      break;
    case "text":
      addProgress(String(e.text));
      break;
    case "turn_completed":
      runningAssignment = null;
      showResult("completed", foreign(e.result));
      void refreshStatus(gen);
      break;
    case "turn_failed": {
      runningAssignment = null;
      const err = e.error as { code?: unknown; message?: unknown };
      showResult("failed", "failed (", foreign(err.code), "): ", foreign(err.message));
      void refreshStatus(gen);
      break;
    }
    case "approval_requested":
      approvalSeen(String(e.request_id), String(e.prompt));
      break;
    case "approval_resolved":
      approvalSettled(String(e.request_id));
      notice("approval", "approval ", foreign(e.request_id), ` ${e.approved === true ? "approved" : "denied"} by `, foreign(e.by));
      break;
    case "approval_denied":
      if (typeof e.request_id === "string") approvalSettled(e.request_id);
      notice("approval", "approval denied: ", foreign(e.reason));
      break;
    case "lagged":
      notice("lagged", `lagged: this page missed ${String(e.missed)} events`);
      break;
    case "gap":
      notice("gap", `gap: events after ${String(e.since)} up to ${String(e.resumed_at)} are no longer held by the runtime`);
      break;
    case "shutting_down":
      notice("info", "the runtime is shutting down");
      break;
    default:
      break;
  }
  updateControls();
}

// ---- approvals ----------------------------------------------------------------------------

interface Approval {
  readonly id: string;
  prompt: string;
  /** The decision callback, when this page was asked (its credential may answer). */
  answer: ((approved: boolean) => void) | null;
  deadline: number | null;
  seenAt: number;
}

const approvals = new Map<string, Approval>();
let shown: Approval | null = null;
let countdown: ReturnType<typeof setInterval> | undefined;

/** The `onApproval` handler: resolves with the person's decision, or false once the request is settled elsewhere. */
function askPerson(request: ApprovalPrompt, context: ApprovalContext): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const a = approvals.get(request.request_id) ?? { id: request.request_id, prompt: request.prompt, answer: null, deadline: null, seenAt: Date.now() };
    let settled = false;
    a.prompt = request.prompt;
    a.deadline = request.timeout_ms !== undefined ? Date.now() + request.timeout_ms : null;
    a.answer = (approved) => {
      if (settled) return;
      settled = true;
      approvalSettled(a.id);
      resolve(approved);
    };
    // Settled elsewhere, timed out, or the socket closed: the transport sends nothing then.
    context.signal.addEventListener("abort", () => a.answer?.(false), { once: true });
    approvals.set(a.id, a);
    render(a);
    ui.approve.focus();
  });
}

/** An `approval_requested` event: shown at once; the buttons come with the request, if it comes to this page. */
function approvalSeen(id: string, prompt: string): void {
  if (approvals.has(id)) return;
  const a: Approval = { id, prompt, answer: null, deadline: null, seenAt: Date.now() };
  approvals.set(id, a);
  render(a);
}

function approvalSettled(id: string): void {
  approvals.delete(id);
  if (shown?.id !== id) return;
  shown = null;
  const next = approvals.values().next();
  if (next.done) {
    clearInterval(countdown);
    ui.approval.close();
  } else {
    render(next.value);
  }
}

function closeAllApprovals(): void {
  for (const a of [...approvals.values()]) a.answer?.(false);
  approvals.clear();
  shown = null;
  clearInterval(countdown);
  if (ui.approval.open) ui.approval.close();
}

function render(a: Approval): void {
  if (shown && shown.id !== a.id && approvals.has(shown.id)) return; // One at a time; the next follows.
  shown = a;
  ui.approvalPrompt.replaceChildren();
  appendEscaped(ui.approvalPrompt, a.prompt, true);
  const canAnswer = a.answer !== null;
  ui.approve.hidden = !canAnswer;
  ui.deny.hidden = !canAnswer;
  ui.approve.disabled = !canAnswer;
  ui.deny.disabled = !canAnswer;
  tick();
  clearInterval(countdown);
  countdown = setInterval(tick, 250);
  if (!ui.approval.open) ui.approval.show();
}

function tick(): void {
  const a = shown;
  if (!a) return;
  if (a.answer === null) {
    ui.approvalInfo.textContent =
      Date.now() - a.seenAt < ANSWERER_GRACE_MS ? "Waiting for the request…" : "This credential may not answer approvals: a frontend that may will answer, or the runtime denies it when the time runs out.";
    return;
  }
  if (a.deadline === null) {
    ui.approvalInfo.textContent = "No time limit given.";
    return;
  }
  const left = Math.max(0, Math.ceil((a.deadline - Date.now()) / 1000));
  if (left === 0) {
    // Fail closed: send nothing; the runtime denies a request nobody answered in time.
    ui.approve.disabled = true;
    ui.deny.disabled = true;
    ui.approvalInfo.textContent = "No answer in time: the runtime denies it.";
    return;
  }
  ui.approvalInfo.textContent = `Time left: ${left} s`;
}

ui.approve.addEventListener("click", () => shown?.answer?.(true));
ui.deny.addEventListener("click", () => shown?.answer?.(false));
ui.approval.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    event.preventDefault();
    shown?.answer?.(false);
  }
});

// ---- controls -----------------------------------------------------------------------------

ui.connectForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const typed = ui.token.value.trim();
  ui.token.value = "";
  const token = typed !== "" ? typed : storedToken();
  if (token === null) {
    notice("error", "paste the runtime's token first");
    ui.token.focus();
    return;
  }
  if (typed !== "") {
    storeToken(token);
    everOpened = false;
    forgetGrant();
  }
  ui.token.placeholder = "saved for this tab";
  void connect(token);
});

ui.forget.addEventListener("click", () => {
  storeToken(null);
  disconnect();
  forgetGrant();
  setLastSeq(null);
  everOpened = false;
  ui.token.placeholder = "";
  setConnection("idle", "not connected (token forgotten)");
});

ui.taskForm.addEventListener("submit", (event) => {
  event.preventDefault();
  void submitTask();
});

ui.task.addEventListener("keydown", (event) => {
  // Ctrl+Enter (or Cmd+Enter) submits from the task box.
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    void submitTask();
  }
});

async function submitTask(): Promise<void> {
  const c = client;
  if (!c || ui.submit.disabled) return;
  const task = ui.task.value.trim();
  if (task === "") {
    notice("error", "write a task first");
    ui.task.focus();
    return;
  }
  const runner = ui.runner.value.trim();
  const assignment = `web-${randomId()}`;
  submitting = true;
  runningAssignment = assignment;
  ui.progress.replaceChildren();
  showResult("running");
  updateControls();
  try {
    const r = await c.submit(runner === "" ? { task, assignment } : { task, assignment, runner });
    showResult("completed", foreign(r.result));
  } catch (e) {
    // The turn's own failure is shown from its `turn_failed` event; a refusal (busy, forbidden, a
    // lease held by another) never started a turn.
    if (!(e instanceof OpenAgentsError) || !["interrupted", "runner_failed", "timeout"].includes(String(e.code))) {
      notice("error", "submit: ", foreign(message(e)));
      if (ui.result.dataset.outcome === "running") showResult("failed", "not started: ", foreign(message(e)));
    }
  } finally {
    submitting = false;
    if (runningAssignment === assignment) runningAssignment = null;
    updateControls();
  }
}

ui.interrupt.addEventListener("click", () => {
  const c = client;
  if (!c) return;
  const assignment = runningAssignment;
  void c.interrupt(assignment === null ? undefined : { assignment }).then(
    (r) => notice("info", r.interrupted ? "interrupt sent: the turn is stopping" : "nothing to interrupt"),
    (e: unknown) => notice("error", "interrupt: ", foreign(message(e))),
  );
});

// ---- start --------------------------------------------------------------------------------

const fromFragment = tokenFromFragment();
if (fromFragment !== null) storeToken(fromFragment);
const initial = fromFragment ?? storedToken();
if (initial !== null) {
  ui.token.placeholder = "saved for this tab";
  void connect(initial);
}
updateControls();
