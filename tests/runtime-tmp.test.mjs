// The local runtime's storage directories (scripts/edge-server.mjs, `runtimeDir`): each
// records the process that owns it, and a new runtime removes the ones whose owner is gone —
// a runtime killed with SIGKILL (the events drill's kill, a CI timeout, Ctrl-\) never runs
// its exit handler, and tmpfs is RAM. A directory whose owner is alive is never touched.
// No runtime needed: the owners here are plain Node processes that create a directory the
// way a runtime does.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { once } from "node:events";

import { runtimeDir, OWNER_FILE } from "../scripts/edge-server.mjs";

const SERVER = new URL("../scripts/edge-server.mjs", import.meta.url).href;

let base;
before(async () => {
  base = await mkdtemp(join(tmpdir(), "understudy-runtime-tmp-test-"));
});
after(() => rm(base, { recursive: true, force: true }));

/** A Node process that creates a runtime directory under `base` and waits; returns it and the directory. */
async function owner() {
  const script = `import { runtimeDir } from ${JSON.stringify(SERVER)};
    console.log(runtimeDir(${JSON.stringify(base)}));
    process.stdin.resume();`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  const [line] = await once(createInterface({ input: child.stdout }), "line");
  return { child, dir: line.trim() };
}

test("a runtime removes the directories of killed runtimes and keeps the live ones' and any it cannot judge", async () => {
  const killed = await owner();
  const live = await owner();
  killed.child.kill("SIGKILL");
  await once(killed.child, "exit");
  assert.ok(existsSync(killed.dir), "a killed runtime leaves its directory behind (no exit handler runs)");
  // Written before owners were recorded: nothing says whether it is in use.
  const unowned = join(base, "understudy-runtime-unowned");
  await mkdir(unowned);
  // Not a runtime's.
  const other = join(base, "something-else");
  await mkdir(other);
  await writeFile(join(other, OWNER_FILE), JSON.stringify({ pid: killed.child.pid }));

  const mine = runtimeDir(base);
  try {
    assert.ok(!existsSync(killed.dir), `${killed.dir}: its owner is gone, so it was removed`);
    assert.ok(existsSync(live.dir), `${live.dir}: its owner runs, so it stays`);
    assert.ok(existsSync(unowned) && existsSync(other));
    const recorded = JSON.parse(await readFile(join(mine, OWNER_FILE), "utf8"));
    assert.equal(recorded.pid, process.pid);
  } finally {
    live.child.stdin.end();
    await once(live.child, "exit");
    await rm(mine, { recursive: true, force: true });
  }
  // A live runtime that ends normally removes its own directory.
  assert.ok(!existsSync(live.dir), `${live.dir}: removed by its owner on exit`);
});

test("a killed owner not yet reaped (a zombie) no longer owns its directory", async () => {
  // `sh` starts the owner, then becomes `sleep`, which never reaps it: once killed, the
  // owner stays a zombie — what a runtime is between its SIGKILL and its parent's wait.
  const script = `import { runtimeDir } from ${JSON.stringify(SERVER)};
    console.log(process.pid, runtimeDir(${JSON.stringify(base)}));
    process.stdin.resume();`;
  const sh = spawn("sh", ["-c", `"$0" --input-type=module -e "$1" & exec sleep 60`, process.execPath, script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const [line] = await once(createInterface({ input: sh.stdout }), "line");
    const [pid, dir] = line.trim().split(" ");
    process.kill(Number(pid), "SIGKILL");
    const end = Date.now() + 5_000;
    const state = () => readFile(`/proc/${pid}/stat`, "utf8").then((t) => t.slice(t.lastIndexOf(")") + 2, t.lastIndexOf(")") + 3));
    while ((await state()) !== "Z" && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    assert.equal(await state(), "Z", "the killed owner is a zombie");
    const mine = runtimeDir(base);
    await rm(mine, { recursive: true, force: true });
    assert.ok(!existsSync(dir), `${dir}: its owner was killed, so it was removed`);
  } finally {
    sh.kill("SIGKILL");
  }
});

test("a reused PID does not keep a dead owner's directory alive", async () => {
  // The recorded PID is now some other process (here: this one), started at another time.
  const reused = join(base, "understudy-runtime-reused");
  await mkdir(reused);
  await writeFile(join(reused, OWNER_FILE), JSON.stringify({ pid: process.pid, start: "1" }));
  const mine = runtimeDir(base);
  try {
    assert.ok(!existsSync(reused), "the owner recorded for it is not the process now using its PID");
    assert.ok(existsSync(mine), "and the new directory, owned by this process, is not removed by its own cleanup");
  } finally {
    await rm(mine, { recursive: true, force: true });
  }
});
