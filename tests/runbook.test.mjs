// [R-GUARD] The runbooks run as written: every command of README's "For CDN ops" section and
// of docs/rollout.md — each line of their ```sh blocks — is run through `sh` from the
// checkout, in the order the page gives it, each page on a registry of its own, and must exit
// 0. The variables are the ones the pages state: `$REGISTRY` (a directory that does not exist
// yet: the page's first command creates it), `$POLICY` (the sample policy with tonight's
// snapshot), `$NEW` (a release of it with its own short [rollout] table), `$BAD` (a release
// whose deadline is below the model's latency), `$OLD` (what ACTIVE named once the registry
// was created), `$WRANGLER` and wrangler's own `CLOUDFLARE_*` variables. Cloudflare is the
// loopback stand-in of tests/cloudflare.test.mjs (scripts/cloudflare-api.mjs, through
// CLOUDFLARE_API_BASE_URL), answering every release's figures as healthy; the local drills
// run in workerd. `$NEW` and `$BAD` are added to the registry (`releases add`) just before
// the first command that names them, as an operator would have built them. A ```sh block of
// one command followed by a ```text block is that command and what it printed: the run must
// print the same lines, figures, times, ports and release IDs aside. docs/rollout.md's misuse
// table is run by cli/tests/guard.rs. Each command's wall time is printed (a diagnostic).
//
// A drill is real time and judged as every drill of the suite is (tests/judged.mjs): a red
// run fails at once, an inconclusive one is played again within the suite's replay budget.
// The commands of a page's "### Measured" section are how its figures were measured, not
// steps of a runbook: the short form runs only those shown with what they print (the
// transcript checked line by line); UNDERSTUDY_LONG=1 runs every one (docs/rollout.md's
// exposure runs: the rollout at 10% is tests/rollout.test.mjs's bad release, the one at 5%
// of 300 req/s the long form's alone). About 1.5 minutes on 2 cores; the long form 2.5.

import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, symlink } from "node:fs/promises";
import { join } from "node:path";

import { ROOT, UNDERSTUDY, requireEdge, tempDir, preparePolicy } from "./harness.mjs";
import { judged } from "./judged.mjs";
import { startCloudflareApi } from "../scripts/cloudflare-api.mjs";

requireEdge();
const LONG = process.env.UNDERSTUDY_LONG === "1";

/**
 * The commands of a page's ```sh blocks, continuation lines joined, comment lines dropped:
 * [{ cmd, printed, measured }], `printed` the ```text block that follows a block of one
 * command, `measured` whether the block sits in a "### Measured" section (how a figure on the
 * page was measured, not a step of the runbook).
 */
function commands(markdown) {
  const out = [];
  const measuredFrom = markdown.indexOf("\n### Measured");
  const measuredTo = measuredFrom < 0 ? -1 : markdown.slice(measuredFrom + 1).search(/\n##+ /) + measuredFrom + 1;
  const inMeasured = (at) => measuredFrom >= 0 && at > measuredFrom && (measuredTo <= measuredFrom || at < measuredTo);
  for (const m of markdown.matchAll(/^```sh\n([\s\S]*?)^```\n(?:\s*^```text\n([\s\S]*?)^```$)?/gm)) {
    const block = [];
    let pending = "";
    for (const line of m[1].split("\n")) {
      const joined = pending + line.trim();
      if (joined.endsWith("\\")) {
        pending = joined.slice(0, -1).trimEnd() + " ";
        continue;
      }
      pending = "";
      if (joined && !joined.startsWith("#")) block.push({ cmd: joined });
    }
    if (m[2] !== undefined) {
      assert.equal(block.length, 1, `a \`\`\`text block follows a \`\`\`sh block of ${block.length} commands:\n${m[1]}`);
      block[0].printed = m[2];
    }
    for (const c of block) c.measured = inMeasured(m.index);
    out.push(...block);
  }
  return out;
}

/**
 * What a transcript says, line by line, without its figures, times, ports and release IDs —
 * and without a rollout's holds (a judgement "holding" and the reasons indented under it): a
 * host that slows a window leaves its p95 unsettled and the rollout holds once before it
 * advances, the same runbook, with the same verdict.
 */
const shape = (text) => {
  const out = [];
  let holding = -1; // the indentation of the hold being skipped
  for (const line of text.split("\n")) {
    const indent = line.length - line.trimStart().length;
    if (holding >= 0 && indent > holding && line.trim()) continue;
    holding = /^(\d\d:\d\d:\d\dZ  )?at \d+%: holding \(/.test(line.trim()) ? indent : -1;
    if (holding >= 0) continue;
    out.push(line.trimEnd().replace(/r-[0-9a-f]{12}/g, "r-…").replace(/\d+(?:\.\d+)?/g, "#"));
  }
  return out.filter(Boolean);
};

/** From the `## heading` line to the next `## `. */
function section(markdown, heading) {
  const from = markdown.indexOf(`\n${heading}`);
  assert.ok(from >= 0, `no section ${heading}`);
  const to = markdown.indexOf("\n## ", from + 1);
  return markdown.slice(from, to < 0 ? undefined : to);
}

const PAGES = [
  { name: "README.md, For CDN ops", file: "README.md", part: (t) => section(t, "## For CDN ops"), least: 6, printed: 0 },
  { name: "docs/rollout.md", file: "docs/rollout.md", part: (t) => t, least: 9, printed: 1 },
];

const variants = {
  // The releases' [rollout] tables are short so that a rollout on the stand-in takes seconds.
  good: (t) =>
    t.replace(/^version = ".*"$/m, 'version = "2026-12-05.new"') +
    '\n[rollout]\nsteps = [50, 100]\ndwell = "1s"\nmin_answers = 100\ndegraded_margin = 0.05\nunavailable_margin = 0.05\n',
  bad: (t) =>
    t
      .replace(/^version = ".*"$/m, 'version = "2026-12-05.bad"')
      .replace(/^deadline = "45ms"$/m, 'deadline = "8ms"')
      .replace(/^attempt_timeout = "45ms"$/m, 'attempt_timeout = "8ms"'),
};

/** `sh -c command` from the checkout; resolves { status, output } (bounded). */
function sh(command, env, timeoutMs = 300_000) {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", command], { cwd: ROOT, env });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (status, signal) => {
      clearTimeout(timer);
      resolve({ status: status ?? signal, output });
    });
  });
}

for (const page of PAGES) {
  describe(`the runbook of ${page.name}`, () => {
    let tmp, api, env, cmds;
    const policies = {};
    before(async () => {
      cmds = commands(page.part(await readFile(join(ROOT, page.file), "utf8")));
      tmp = await tempDir("understudy-runbook-");
      for (const name of ["serving", "good", "bad"]) {
        const dir = join(tmp.dir, name);
        await mkdir(dir);
        policies[name] = await preparePolicy("recommendations", dir, { edit: variants[name] });
      }
      const bin = join(tmp.dir, "bin");
      await mkdir(bin);
      await symlink(UNDERSTUDY, join(bin, "understudy"));
      const healthy = { rps: 400, degraded: 0, unavailable: 0, latencyMs: 30 };
      api = await startCloudflareApi({ figures: new Proxy({}, { get: () => healthy }) });
      env = {
        ...process.env,
        PATH: `${bin}:${process.env.PATH}`,
        REGISTRY: join(tmp.dir, "registry"),
        POLICY: policies.serving,
        WRANGLER: join(ROOT, "node_modules", ".bin", "wrangler"),
        CLOUDFLARE_API_BASE_URL: api.url,
        CLOUDFLARE_API_TOKEN: api.token,
        CLOUDFLARE_ACCOUNT_ID: "0123456789abcdef0123456789abcdef",
        WRANGLER_SEND_METRICS: "false",
        CI: "1",
        NO_COLOR: "1",
      };
      for (const v of ["NEW", "BAD", "OLD"]) delete env[v];
    });
    after(async () => {
      await api?.close();
      await tmp?.cleanup();
    });

    test("every command runs as written", { timeout: 1_200_000 }, async (t) => {
      assert.ok(cmds.length >= page.least, `${page.file}: only ${cmds.length} commands found:\n${cmds.map((c) => c.cmd).join("\n")}`);
      assert.equal(cmds.filter((c) => c.printed).length, page.printed, `${page.file}: the commands shown with what they print`);
      assert.ok(!existsSync(env.REGISTRY));
      const release = { NEW: "good", BAD: "bad" };
      for (const { cmd, printed, measured } of cmds) {
        if (measured && printed === undefined && !LONG) {
          t.diagnostic(`long form only (UNDERSTUDY_LONG=1): ${cmd}`);
          continue;
        }
        for (const [v, name] of Object.entries(release)) {
          if (cmd.includes(`$${v}`) && !env[v]) {
            const r = await sh(`understudy releases add "${policies[name]}" --registry "$REGISTRY"`, env);
            assert.equal(r.status, 0, r.output);
            env[v] = /release (r-[0-9a-f]{12})/.exec(r.output)?.[1];
            assert.ok(env[v], r.output);
          }
        }
        assert.ok(!cmd.includes("$OLD") || env.OLD, `${cmd}: $OLD is named before the registry has an active release`);
        const t0 = Date.now();
        const run = async () => {
          const r = await sh(cmd, env);
          return { ...r, stdout: "", stderr: r.output, json: null };
        };
        const r = cmd.startsWith("understudy drill") ? await judged(t, `${page.file}: ${cmd}`, run) : await run();
        t.diagnostic(`${((Date.now() - t0) / 1000).toFixed(1)} s (exit ${r.status}): ${cmd}`);
        assert.equal(r.status, 0, `${page.file}: \`${cmd}\` exited ${r.status}:\n${r.output}`);
        if (printed !== undefined) {
          assert.deepEqual(shape(r.output), shape(printed), `${page.file}: \`${cmd}\` printed other lines than the page shows:\n${r.output}`);
        }
        const active = join(env.REGISTRY, "ACTIVE");
        if (!env.OLD && existsSync(active)) env.OLD = (await readFile(active, "utf8")).trim();
      }
    });
  });
}
