/**
 * The web page `openagents serve --http` serves on `GET /`: a frontend for `/frontend/v2`, on
 * the TypeScript client's browser WebSocket transport.
 *
 * - The token comes from the password field or the URL fragment `#token=…` (never sent to the
 *   server; removed from the address bar at once), is kept in `sessionStorage` only, and goes
 *   out only inside the WebSocket handshake (the `openagents.bearer.<token>` subprotocol). It is
 *   never put in a URL, a log or the page.
 * - Everything a runner or client sends is shown as text (`textContent`), never as HTML.
 * - A dropped connection is reconnected with backoff and resumes from the last `seq`; `lagged`
 *   and `gap` are shown as notices, as is a runtime that restarted (its sequence went back).
 * - Approval requests open a dialog with the prompt's full text, Approve / Deny and the time
 *   left; when it runs out the page sends nothing and the runtime denies (approvals fail closed).
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

// ---- notices, events, result --------------------------------------------------------------

function notice(kind: string, text: string): void {
  const li = document.createElement("li");
  li.dataset.kind = kind;
  li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  ui.notices.prepend(li);
  while (ui.notices.childElementCount > MAX_NOTICES) ui.notices.lastElementChild?.remove();
}

function eventDetail(ev: ServerEvent): string {
  const e = ev.event;
  if (!isKnownRuntimeEvent(e)) return JSON.stringify(e);
  switch (e.type) {
    case "turn_started":
      return `${String(e.assignment)} on ${String(e.runner)}`;
    case "text":
      return String(e.text);
    case "turn_completed":
      return String(e.result);
    case "turn_failed": {
      const err = e.error as { code?: unknown; message?: unknown };
      return `${String(err.code)}: ${String(err.message)}`;
    }
    case "approval_requested":
      return String(e.prompt);
    case "approval_resolved":
      return `${e.approved === true ? "approved" : "denied"} by ${String(e.by)}`;
    case "approval_denied":
      return String(e.reason);
    case "lagged":
      return `missed ${String(e.missed)} events`;
    case "gap":
      return `events after ${String(e.since)} up to ${String(e.resumed_at)} are lost`;
    case "shutting_down":
      return "the runtime is shutting down";
    default:
      return JSON.stringify(e);
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
  kind.textContent = String(ev.event.type);
  const detail = document.createElement("span");
  detail.className = "detail";
  detail.textContent = eventDetail(ev);
  li.append(seq, kind, detail);
  const atBottom = ui.events.scrollTop + ui.events.clientHeight >= ui.events.scrollHeight - 4;
  ui.events.append(li);
  while (ui.events.childElementCount > MAX_EVENTS) ui.events.firstElementChild?.remove();
  if (atBottom) ui.events.scrollTop = ui.events.scrollHeight;
}

function showResult(outcome: "running" | "completed" | "failed", text: string): void {
  ui.result.dataset.outcome = outcome;
  ui.result.textContent = text;
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

function setConnection(state: "idle" | "connecting" | "connected" | "reconnecting" | "failed", text: string): void {
  ui.connection.dataset.state = state;
  ui.connection.textContent = text;
  ui.statusConnection.textContent = text;
  updateControls();
}

function updateControls(): void {
  const connected = ui.connection.dataset.state === "connected";
  ui.submit.disabled = !connected || submitting || runningAssignment !== null;
  ui.interrupt.disabled = !connected || (runningAssignment === null && !submitting);
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
  setConnection("reconnecting", `reconnecting in ${(delay / 1000).toFixed(1)} s (attempt ${attempt}): ${why}`);
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
    setConnection("failed", `cannot connect: ${message(e)}`);
    return;
  }
  const c = new OpenAgentsClient(t, { onSchemaMismatch: (m) => notice("error", m.message) });
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
    if (gen === generation) notice("error", `status: ${message(e)}`);
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
    if (gen === generation && !(e instanceof WebSocketClosedError)) notice("error", `events: ${message(e)}`);
  }
}

function renderStatus(s: RuntimeStatus): void {
  ui.statusState.textContent = String(s.state);
  ui.statusRunner.textContent = s.active_turn ? `${s.active_turn.runner} (turn ${s.active_turn.assignment})` : "none running";
  ui.statusLease.textContent = s.lease ? `${s.lease.holder}, until ${new Date(s.lease.expires_at_ms).toLocaleTimeString()}` : "free";
  ui.statusProtocol.textContent = `${s.protocol_version ?? "unknown"}${s.schema_digest ? ` (schema ${s.schema_digest.slice(0, 12)})` : ""}`;
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
      ui.progress.textContent = "";
      showResult("running", "");
      void refreshStatus(gen);
      break;
    case "text":
      ui.progress.textContent = ui.progress.textContent === "" ? String(e.text) : `${ui.progress.textContent} ${String(e.text)}`;
      break;
    case "turn_completed":
      runningAssignment = null;
      showResult("completed", String(e.result));
      void refreshStatus(gen);
      break;
    case "turn_failed": {
      runningAssignment = null;
      const err = e.error as { code?: unknown; message?: unknown };
      showResult("failed", `failed (${String(err.code)}): ${String(err.message)}`);
      void refreshStatus(gen);
      break;
    }
    case "approval_requested":
      approvalSeen(String(e.request_id), String(e.prompt));
      break;
    case "approval_resolved":
      approvalSettled(String(e.request_id));
      notice("approval", `approval ${String(e.request_id)} ${e.approved === true ? "approved" : "denied"} by ${String(e.by)}`);
      break;
    case "approval_denied":
      if (typeof e.request_id === "string") approvalSettled(e.request_id);
      notice("approval", `approval denied: ${String(e.reason)}`);
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
  ui.approvalPrompt.textContent = a.prompt;
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
  }
  ui.token.placeholder = "saved for this tab";
  void connect(token);
});

ui.forget.addEventListener("click", () => {
  storeToken(null);
  disconnect();
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
  ui.progress.textContent = "";
  showResult("running", "");
  updateControls();
  try {
    const r = await c.submit(runner === "" ? { task, assignment } : { task, assignment, runner });
    showResult("completed", r.result);
  } catch (e) {
    // The turn's own failure is shown from its `turn_failed` event; a refusal (busy, forbidden, a
    // lease held by another) never started a turn.
    if (!(e instanceof OpenAgentsError) || !["interrupted", "runner_failed", "timeout"].includes(String(e.code))) {
      notice("error", `submit: ${message(e)}`);
      if (ui.result.dataset.outcome === "running") showResult("failed", `not started: ${message(e)}`);
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
    (e: unknown) => notice("error", `interrupt: ${message(e)}`),
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
