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
 * - History: the conversations the runtime's store keeps (`conversations`, newest first, paged
 *   with `next`) and the chosen one's transcript (`conversation`: each turn's task, then its
 *   result or error, oldest first, paged). A task submitted while a conversation is chosen
 *   continues it (`submit`'s `conversation`, on its runner unless another is typed); a task
 *   submitted with none chosen starts one, which is then chosen. The chosen conversation is named
 *   in the URL fragment (`#conversation=<id>`), so a reload shows it again. A credential that may
 *   not read events may not read the history either: the page says so instead of the panel.
 */

import { OpenAgentsClient } from "../../typescript/src/client.js";
import { OpenAgentsError } from "../../typescript/src/error.js";
import type {
  ApprovalPrompt,
  ConversationsParams,
  ConversationSummary,
  RuntimeStatus,
  ServerEvent,
  SubmitParams,
  TurnSummary,
} from "../../typescript/src/generated/types.js";
import { HISTORY_DEFAULT_PAGE, HISTORY_MAX_PAGE, isKnownRuntimeEvent } from "../../typescript/src/generated/types.js";
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
  taskConversation: byId<HTMLParagraphElement>("task-conversation"),
  historyInfo: byId<HTMLParagraphElement>("history-info"),
  history: byId<HTMLDivElement>("history"),
  newConversation: byId<HTMLButtonElement>("new-conversation"),
  conversations: byId<HTMLOListElement>("conversations"),
  conversationsEmpty: byId<HTMLParagraphElement>("conversations-empty"),
  conversationsMore: byId<HTMLButtonElement>("conversations-more"),
  transcriptInfo: byId<HTMLParagraphElement>("transcript-info"),
  transcript: byId<HTMLOListElement>("transcript"),
  transcriptMore: byId<HTMLButtonElement>("transcript-more"),
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
  forgetHistory();
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
  ui.taskConversation.hidden = may.submit === "forbidden" || historyAccess !== "allowed";
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
  let caller: { methods?: unknown; events?: unknown } | undefined;
  try {
    const reply = (await t.request("status", undefined)) as { result?: { caller?: { methods?: unknown; events?: unknown } } } | null;
    caller = reply?.result?.caller;
  } catch {
    return;
  }
  if (gen !== generation) return;
  const methods = caller?.methods;
  const allowed = (method: string): Permission => (!Array.isArray(methods) || methods.includes(method) ? "allowed" : "forbidden");
  may.submit = allowed("submit");
  may.interrupt = allowed("interrupt");
  // The history is read by the grant's `events` flag; a runtime that names its caller but lists
  // no `conversations` for one that may read events has no history (older than protocol 1.3.0).
  // One that does not name its caller is asked, and its answer tells.
  historyAccess = caller?.events === false ? "forbidden" : !Array.isArray(methods) || methods.includes("conversations") ? "allowed" : "unsupported";
  renderHistoryAccess();
  updateControls();
  if (historyAccess === "allowed") void refreshHistory();
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

/** The URL fragment's parameters (`#token=…&conversation=…`). */
function fragmentParams(): URLSearchParams {
  return new URLSearchParams(location.hash.startsWith("#") ? location.hash.slice(1) : "");
}

/** Replaces the URL fragment with `params` (none when empty), adding no history entry. */
function setFragment(params: URLSearchParams): void {
  const rest = params.toString();
  const hash = rest === "" ? "" : `#${rest}`;
  if (location.hash === hash) return;
  history.replaceState(null, "", location.pathname + location.search + hash);
}

/** The token in the URL fragment `#token=…`, removed from the address bar and history (the rest of the fragment stays). */
function tokenFromFragment(): string | null {
  const params = fragmentParams();
  const token = params.get("token");
  if (token === null) return null;
  params.delete("token");
  setFragment(params);
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
      // The turn this page submitted without a conversation started one: it is now the chosen one.
      if (e.assignment === submittedAssignment && chosen === null && historyAccess === "allowed") choose(String(e.conversation));
      void refreshHistory();
      break;
    case "text":
      addProgress(String(e.text));
      break;
    case "turn_completed":
      runningAssignment = null;
      showResult("completed", foreign(e.result));
      void refreshStatus(gen);
      void refreshHistory();
      break;
    case "turn_failed": {
      runningAssignment = null;
      const err = e.error as { code?: unknown; message?: unknown };
      showResult("failed", "failed (", foreign(err.code), "): ", foreign(err.message));
      void refreshStatus(gen);
      void refreshHistory();
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

// ---- history: the conversations the store keeps, and the chosen one's transcript ---------

/** Whether this page may read the history: as `status` says; `unsupported` for a runtime without it (older than protocol 1.3.0). */
type HistoryAccess = Permission | "unsupported";
let historyAccess: HistoryAccess = "unknown";

/** The chosen conversation: its id (from the list, the URL's `#conversation=`, or a turn this page started) and, once read, its summary. */
let chosen: { readonly id: string; summary: ConversationSummary | null } | null = null;
/** The cursor of the list's next page, when it has one. */
let listNext: string | undefined;
/** The cursor of the transcript's next page (later turns), when it has one. */
let transcriptNext: string | undefined;
/** Bumped by every reload of the list or the transcript: an answer to an older request is dropped. */
let listEpoch = 0;
let transcriptEpoch = 0;
/** The assignment this page submitted last: its `turn_started` names the conversation it started. */
let submittedAssignment: string | null = null;
/** A refresh is under way; another was asked for meanwhile. */
let historyBusy = false;
let historyAgain = false;

/** `ms` since the epoch as this browser's local date and time, in a `<time>` element. */
function timeElement(ms: number): HTMLElement {
  const el = document.createElement("time");
  const d = new Date(ms);
  if (Number.isFinite(d.getTime())) {
    el.dateTime = d.toISOString();
    el.textContent = d.toLocaleString();
  } else {
    el.textContent = "an unknown time";
  }
  return el;
}

/** Shows the panel, or why there is none. */
function renderHistoryAccess(): void {
  ui.history.hidden = historyAccess !== "allowed";
  ui.historyInfo.hidden = historyAccess === "allowed";
  ui.historyInfo.dataset.access = historyAccess;
  switch (historyAccess) {
    case "forbidden":
      ui.historyInfo.textContent = "This credential may not read the history (the conversations and their turns): its grant does not allow reading events.";
      break;
    case "unsupported":
      ui.historyInfo.textContent = "This runtime keeps no history the page can read: it is older than protocol 1.3.0, which added the conversations.";
      break;
    case "unknown":
      ui.historyInfo.textContent = "Connect to see the conversations the runtime keeps.";
      break;
    case "allowed":
      ui.historyInfo.textContent = "";
      break;
  }
  updateControls();
}

/** A new token (or none): nothing shown of what the old one could read. */
function forgetHistory(): void {
  historyAccess = "unknown";
  listEpoch++;
  transcriptEpoch++;
  listNext = undefined;
  transcriptNext = undefined;
  ui.conversations.replaceChildren();
  ui.conversationsMore.hidden = true;
  ui.conversationsEmpty.hidden = true;
  ui.transcript.replaceChildren();
  ui.transcriptMore.hidden = true;
  if (chosen !== null) chosen.summary = null;
  renderChoice();
  renderHistoryAccess();
}

/** A history call failed: a refused or unknown method changes what the panel shows; anything else is a notice. */
function historyFailed(e: unknown, what: string): void {
  if (e instanceof WebSocketClosedError) return; // The connection's close handler reports it.
  if (e instanceof OpenAgentsError && e.code === "forbidden") historyAccess = "forbidden";
  else if (e instanceof OpenAgentsError && e.code === "unknown_method") historyAccess = "unsupported";
  else {
    notice("error", `${what}: `, foreign(message(e)));
    return;
  }
  renderHistoryAccess();
}

/** Marks the chosen conversation in the list and says on the task form what a submitted task does. */
function renderChoice(): void {
  for (const b of ui.conversations.querySelectorAll<HTMLButtonElement>("button[data-id]")) {
    if (b.dataset.id === chosen?.id) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
  const s = chosen?.summary ?? null;
  if (chosen === null) show(ui.taskConversation, "A task submitted now starts a new conversation.");
  else if (s === null) show(ui.taskConversation, "A task submitted now continues the conversation ", foreign(chosen.id), ".");
  else show(ui.taskConversation, "A task submitted now continues the conversation “", foreign(s.title === "" ? s.id : s.title), "” on ", foreign(s.runner), ".");
  // A runner id is a plain identifier (the schema's Id); anything else is not put in an attribute.
  ui.runner.placeholder = s !== null && /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(s.runner) ? `the conversation's (${s.runner})` : "the runtime's default";
  ui.transcriptMore.hidden = chosen === null || transcriptNext === undefined;
}

/** Chooses conversation `id` (none: the next task starts a new one), names it in the URL and shows its transcript. */
function choose(id: string | null, summary: ConversationSummary | null = null): void {
  if (id !== null && id === chosen?.id) {
    if (summary !== null) chosen.summary = summary;
    renderChoice();
    return;
  }
  chosen = id === null ? null : { id, summary };
  const params = fragmentParams();
  if (id === null) params.delete("conversation");
  else params.set("conversation", id);
  setFragment(params);
  transcriptEpoch++;
  transcriptNext = undefined;
  ui.transcript.replaceChildren();
  renderChoice();
  if (chosen === null) show(ui.transcriptInfo, "Choose a conversation to see its turns.");
  else {
    show(ui.transcriptInfo, "Loading the conversation ", foreign(chosen.id), "…");
    void loadTranscript(false);
  }
}

function conversationItem(s: ConversationSummary): HTMLLIElement {
  const li = document.createElement("li");
  li.dataset.id = s.id;
  li.dataset.turns = String(s.turns);
  const b = document.createElement("button");
  b.type = "button";
  b.dataset.id = s.id;
  const title = document.createElement("span");
  title.className = "title";
  show(title, foreign(s.title === "" ? s.id : s.title));
  const meta = document.createElement("span");
  meta.className = "meta";
  show(meta, foreign(s.runner), ` · ${s.turns} ${s.turns === 1 ? "turn" : "turns"} · `);
  meta.append(timeElement(s.updated_at_ms));
  b.append(title, meta);
  b.addEventListener("click", () => choose(s.id, s));
  li.append(b);
  return li;
}

/** Reads the list again from its first page (as many as it shows, within a page's limit), or its next page (`more`). */
async function loadConversations(more: boolean): Promise<void> {
  const c = client;
  if (c === null || historyAccess !== "allowed" || (more && listNext === undefined)) return;
  const epoch = more ? listEpoch : ++listEpoch;
  const shown = ui.conversations.childElementCount;
  const params: ConversationsParams =
    more && listNext !== undefined ? { cursor: listNext, limit: HISTORY_DEFAULT_PAGE } : { limit: Math.min(HISTORY_MAX_PAGE, Math.max(HISTORY_DEFAULT_PAGE, shown)) };
  ui.conversationsMore.disabled = true;
  try {
    const page = await c.conversations(params);
    if (epoch !== listEpoch) return;
    if (!more) ui.conversations.replaceChildren();
    // A conversation that moved to the front while paging may come twice: shown once.
    const have = new Set([...ui.conversations.children].map((li) => (li as HTMLElement).dataset.id));
    for (const s of page.conversations) {
      if (have.has(s.id)) continue;
      have.add(s.id);
      ui.conversations.append(conversationItem(s));
      if (s.id === chosen?.id) chosen.summary = s;
    }
    listNext = page.next;
    ui.conversationsMore.hidden = listNext === undefined;
    ui.conversationsEmpty.hidden = ui.conversations.childElementCount > 0;
    renderChoice();
  } catch (e) {
    if (epoch === listEpoch) historyFailed(e, "conversations");
  } finally {
    if (epoch === listEpoch) ui.conversationsMore.disabled = false;
  }
}

/** One message of the transcript: who (the page's words and foreign text) and what (foreign text, or the page's words). */
function bubble(kind: "task" | "answer", who: Part[], what: Part[]): HTMLDivElement {
  const div = document.createElement("div");
  div.className = `message ${kind}`;
  const whoEl = document.createElement("span");
  whoEl.className = "who";
  show(whoEl, ...who);
  const text = document.createElement("div");
  text.className = "text foreign";
  text.dir = "ltr";
  show(text, ...what);
  div.append(whoEl, text);
  return div;
}

function turnItem(t: TurnSummary): HTMLLIElement {
  const li = document.createElement("li");
  li.className = "turn";
  li.dataset.assignment = t.assignment;
  li.dataset.outcome = String(t.outcome);
  const task = bubble("task", ["Task"], [foreign(t.task)]);
  let what: Part[];
  if (t.outcome === "completed") what = [foreign(t.result ?? "")];
  else if (t.outcome === "running") what = ["running…"];
  else if (t.error !== undefined) what = [`${t.outcome === "interrupted" ? "interrupted" : "failed"} (`, foreign(t.error.code), "): ", foreign(t.error.message)];
  else what = [foreign(t.outcome)];
  const answer = bubble("answer", [foreign(t.runner), " · ", foreign(t.outcome)], what);
  answer.dataset.outcome = String(t.outcome);
  const when = document.createElement("span");
  when.className = "meta";
  when.append("started ", timeElement(t.started_at_ms));
  if (t.finished_at_ms !== undefined) when.append(", ended ", timeElement(t.finished_at_ms));
  li.append(task, answer, when);
  return li;
}

/**
 * Reads the chosen conversation again from its first turn (at least as many turns as shown, so a
 * refresh keeps what was paged in), or its next page of later turns (`more`).
 */
async function loadTranscript(more: boolean): Promise<void> {
  const c = client;
  const target = chosen;
  if (c === null || target === null || historyAccess !== "allowed" || (more && transcriptNext === undefined)) return;
  const epoch = more ? transcriptEpoch : ++transcriptEpoch;
  const want = more ? 0 : ui.transcript.childElementCount;
  const turns: TurnSummary[] = [];
  let cursor = more ? transcriptNext : undefined;
  let summary: ConversationSummary;
  ui.transcriptMore.disabled = true;
  try {
    do {
      const page = await c.conversation(cursor === undefined ? { id: target.id } : { id: target.id, cursor });
      if (epoch !== transcriptEpoch) return;
      summary = page.conversation;
      turns.push(...page.turns);
      cursor = page.next;
    } while (cursor !== undefined && turns.length < want);
  } catch (e) {
    if (epoch !== transcriptEpoch) return;
    if (e instanceof OpenAgentsError && e.code === "conversation_not_found") {
      ui.transcript.replaceChildren();
      transcriptNext = undefined;
      show(ui.transcriptInfo, "The runtime keeps no conversation ", foreign(target.id), ": a task submitted now starts it.");
      renderChoice();
    } else if (e instanceof OpenAgentsError && e.code === "invalid_params") {
      show(ui.transcriptInfo, foreign(target.id), " is not a conversation id.");
      if (chosen === target) choose(null);
    } else {
      historyFailed(e, "conversation");
    }
    return;
  } finally {
    if (epoch === transcriptEpoch) ui.transcriptMore.disabled = false;
  }
  const atBottom = ui.transcript.scrollTop + ui.transcript.clientHeight >= ui.transcript.scrollHeight - 4;
  if (!more) ui.transcript.replaceChildren();
  for (const t of turns) ui.transcript.append(turnItem(t));
  transcriptNext = cursor;
  target.summary = summary;
  show(
    ui.transcriptInfo,
    "“",
    foreign(summary.title === "" ? summary.id : summary.title),
    "” on ",
    foreign(summary.runner),
    ` · ${summary.turns} ${summary.turns === 1 ? "turn" : "turns"} · id `,
    foreign(summary.id),
  );
  if (!more && atBottom) ui.transcript.scrollTop = ui.transcript.scrollHeight;
  renderChoice();
}

/** Reads the list and the chosen transcript again; calls while one runs are folded into one more. */
async function refreshHistory(): Promise<void> {
  if (historyAccess !== "allowed" || client === null) return;
  if (historyBusy) {
    historyAgain = true;
    return;
  }
  historyBusy = true;
  try {
    do {
      historyAgain = false;
      await loadConversations(false);
      await loadTranscript(false);
    } while (historyAgain && historyAccess === "allowed" && client !== null);
  } finally {
    historyBusy = false;
  }
}

ui.conversationsMore.addEventListener("click", () => void loadConversations(true));
ui.transcriptMore.addEventListener("click", () => void loadTranscript(true));
ui.newConversation.addEventListener("click", () => {
  choose(null);
  ui.task.focus();
});
window.addEventListener("hashchange", () => {
  const token = tokenFromFragment();
  if (token !== null) {
    storeToken(token);
    everOpened = false;
    forgetGrant();
    ui.token.placeholder = "saved for this tab";
    void connect(token);
  }
  const id = fragmentParams().get("conversation");
  const named = id === null || id.trim() === "" ? null : id.trim();
  if (named !== (chosen?.id ?? null)) choose(named);
});

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
  const typedRunner = ui.runner.value.trim();
  const assignment = `web-${randomId()}`;
  // The chosen conversation is continued, on its own runner unless another is typed.
  const continued = historyAccess === "allowed" ? chosen : null;
  const runner = typedRunner !== "" ? typedRunner : (continued?.summary?.runner ?? "");
  const params: SubmitParams = { task, assignment };
  if (runner !== "") params.runner = runner;
  if (continued !== null) params.conversation = continued.id;
  submitting = true;
  submittedAssignment = assignment;
  runningAssignment = assignment;
  ui.progress.replaceChildren();
  showResult("running");
  updateControls();
  try {
    const r = await c.submit(params);
    showResult("completed", foreign(r.result));
    if (continued === null && chosen === null && historyAccess === "allowed") choose(r.conversation);
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
    void refreshHistory();
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
const namedConversation = fragmentParams().get("conversation")?.trim() ?? "";
if (namedConversation !== "") {
  // Shown once the connection's grant allows reading the history.
  chosen = { id: namedConversation, summary: null };
  show(ui.transcriptInfo, "Loading the conversation ", foreign(namedConversation), "…");
}
renderChoice();
const initial = fromFragment ?? storedToken();
if (initial !== null) {
  ui.token.placeholder = "saved for this tab";
  void connect(initial);
}
updateControls();
