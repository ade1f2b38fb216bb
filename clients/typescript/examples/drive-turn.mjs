#!/usr/bin/env node
// Drives one turn through an openagents runtime with the TypeScript client and prints its events.
//
//   node examples/drive-turn.mjs [--stdio] [--runner ID] [TASK...]
//
// Starts `openagents serve --http --runner ID` (or `--stdio`) itself: the binary is
// $OPENAGENTS_BIN, else this repository's target/debug/openagents. As for any `serve`, the
// operator's configuration ($OPENAGENTS_CONFIG) must enable the server, and the runner must be
// in the registry ($OPENAGENTS_RUNNERS). Then it subscribes to events, submits the task, prints
// each event of the turn as it arrives, prints the result, and shuts the runtime down.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { isKnownRuntimeEvent, OpenAgentsClient, OpenAgentsError } from "@openagents/client";
import { connectStdio } from "@openagents/client/node";

const args = process.argv.slice(2);
let runner = "echo";
let stdio = false;
const words = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--runner") runner = args[++i] ?? runner;
  else if (args[i] === "--stdio") stdio = true;
  else words.push(args[i]);
}
const task = words.length > 0 ? words.join(" ") : "hello from typescript";
const bin = process.env.OPENAGENTS_BIN ?? fileURLToPath(new URL("../../../target/debug/openagents", import.meta.url));

/** One line per event. @param {import("@openagents/client").ServerEvent} ev */
function show(ev) {
  const e = ev.event;
  if (!isKnownRuntimeEvent(e)) return `#${ev.seq} ${e.type} (a kind this client does not know)`;
  switch (e.type) {
    case "turn_started":
      return `#${ev.seq} turn_started  runner=${e.runner} assignment=${e.assignment}`;
    case "text":
      return `#${ev.seq} text          ${JSON.stringify(e.text)}`;
    case "turn_completed":
      return `#${ev.seq} turn_completed ${JSON.stringify(e.result)}`;
    case "turn_failed":
      return `#${ev.seq} turn_failed   ${e.error.code}: ${e.error.message}`;
    default:
      return `#${ev.seq} ${e.type}`;
  }
}

/** Starts `serve --http` and waits for its readiness line. */
async function startHttp() {
  const child = spawn(bin, ["serve", "--http", "--runner", runner], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`openagents serve exited (${code}) before it was ready`)));
  });
  const ready = JSON.parse(line);
  const token = readFileSync(ready.token_file, "utf8").trim();
  console.log(`runtime: ${ready.url} (HTTP; token from ${ready.token_file})`);
  return { client: OpenAgentsClient.http({ url: ready.url, token }), child };
}

const { client, child } = stdio ? { client: connectStdio({ runner, bin }), child: null } : await startHttp();
if (stdio) console.log(`runtime: ${bin} serve --stdio --runner ${runner}`);
let code = 0;
try {
  const status = await client.status();
  console.log(`status: ${status.state}, schema ${status.schema_version}`);
  console.log(`submit: ${JSON.stringify(task)} to runner ${runner}`);
  const result = await client.runTurn({ task }, { onEvent: (ev) => console.log(show(ev)) });
  console.log(`result: ${JSON.stringify(result.result)} (assignment ${result.assignment})`);
} catch (e) {
  code = 1;
  if (e instanceof OpenAgentsError) console.error(`turn failed: ${e.name} (${e.code}, retryable: ${e.retryable}): ${e.message}`);
  else console.error(`drive-turn: ${e instanceof Error ? e.message : String(e)}`);
} finally {
  await client.shutdown().catch(() => undefined);
  await client.close();
  if (child) await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once("exit", r)));
}
process.exit(code);
