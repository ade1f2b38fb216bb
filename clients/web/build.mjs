// Builds the web page into crates/server/web (checked in, embedded in the binary):
//   node build.mjs            write the bundle there
//   node build.mjs --check    build into a temporary folder and fail when the checked-in bundle differs
//   node build.mjs --out DIR  write the bundle into DIR
// The bundle is src/app.ts and what it imports from the TypeScript client (clients/typescript/src),
// bundled by the pinned esbuild; index.html, app.css and icon.svg are copied as they are.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const checkedIn = join(here, "..", "..", "crates", "server", "web");
/** Every file of the bundle, relative to its folder. */
const FILES = ["index.html", "assets/app.js", "assets/app.css", "assets/icon.svg"];

async function buildInto(out) {
  mkdirSync(join(out, "assets"), { recursive: true });
  await build({
    entryPoints: [join(here, "src", "app.ts")],
    outfile: join(out, "assets", "app.js"),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: ["es2022"],
    minify: true,
    legalComments: "none",
    charset: "utf8",
    logLevel: "warning",
  });
  copyFileSync(join(here, "index.html"), join(out, "index.html"));
  copyFileSync(join(here, "app.css"), join(out, "assets", "app.css"));
  copyFileSync(join(here, "icon.svg"), join(out, "assets", "icon.svg"));
}

const args = process.argv.slice(2);
if (args[0] === "--check") {
  const tmp = mkdtempSync(join(tmpdir(), "openagents-web-"));
  try {
    await buildInto(tmp);
    const stale = FILES.filter((f) => {
      let old;
      try {
        old = readFileSync(join(checkedIn, f));
      } catch {
        return true;
      }
      return !old.equals(readFileSync(join(tmp, f)));
    });
    if (stale.length > 0) {
      console.error(`the checked-in web bundle (crates/server/web) differs from its sources in clients/web for: ${stale.join(", ")}`);
      console.error("rebuild it with: cd clients/web && npm ci && npm run build   (then commit crates/server/web)");
      process.exit(1);
    }
    console.log("the checked-in web bundle matches its sources");
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  const out = args[0] === "--out" && args[1] ? args[1] : checkedIn;
  await buildInto(out);
  console.log(`built the web page into ${out}`);
}
