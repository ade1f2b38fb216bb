#!/usr/bin/env node
// The echo runner, in TypeScript's runtime: streams the task back word by word as `text`
// events, then completes with the whole task. Written with `serveStreaming`, as a runner author
// would. Register it in the operator's registry (runners.toml):
//
//   [runners.echo-ts]
//   command = "/usr/bin/node"                       # an absolute path to node
//   args = ["/path/to/clients/typescript/examples/echo-runner.mjs"]
import { serveStreaming } from "@openagents/client/runner";

await serveStreaming(async (turn, progress) => {
  process.stderr.write(`echo-ts: turn ${turn.assignment} for ${turn.agent.runner}\n`);
  for (const word of turn.task.split(/\s+/).filter((w) => w.length > 0)) {
    await progress.text(word);
  }
  return turn.task;
});
