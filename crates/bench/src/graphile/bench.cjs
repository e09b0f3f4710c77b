// coder-bench's graphile-worker baseline (written for coder-bench; uses only graphile-worker's
// public API). Reads its settings from BENCH_CONFIG (JSON), prints one JSON line of results.
//
// - latency: jobs added at a steady rate with addJob(); for each, add call → task handler
//   entry, from one monotonic clock (performance.now()) in this one process.
// - drain: `drain_jobs` no-op jobs added in one addJobs() call while the worker idles; jobs/s
//   from that call's return to the last "job:complete" event (result written back).
// Both use the default (unbatched) mode with `concurrency` workers, the logger silenced.
"use strict";
const { run, makeWorkerUtils, Logger } = require("graphile-worker");
const { Pool } = require("pg");

const cfg = JSON.parse(process.env.BENCH_CONFIG);
const silent = new Logger(() => () => {});
const now = () => performance.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

function pool(max) {
  const p = new Pool({ host: cfg.socket_dir, port: cfg.port, user: cfg.user, database: cfg.database, max });
  // An idle client's error must not crash the run; a failing query still fails it.
  const report = (e) => process.stderr.write(`pool error: ${e}\n`);
  p.on("error", report);
  p.on("connect", (client) => client.on("error", report));
  return p;
}

async function until(predicate, what) {
  const deadline = now() + cfg.timeout_ms;
  while (!predicate()) {
    if (now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(1);
  }
}

async function main() {
  const workerPool = pool(cfg.concurrency + 2);
  const addPool = pool(4);
  const utils = await makeWorkerUtils({ pgPool: addPool, logger: silent });
  await utils.migrate();
  const started = new Map();
  let completed = 0;
  let lastComplete = 0;
  const runner = await run({
    pgPool: workerPool,
    logger: silent,
    concurrency: cfg.concurrency,
    noHandleSignals: true,
    pollInterval: 2000,
    taskList: {
      noop: async (payload) => {
        started.set(payload.i, now());
      },
    },
  });
  runner.events.on("job:complete", () => {
    completed += 1;
    lastComplete = now();
  });

  let next = 0;
  async function latencyRun(count) {
    const added = new Map();
    const adds = [];
    const t0 = now() + 20;
    for (let k = 0; k < count; k += 1) {
      await sleep(t0 + (k * 1000) / cfg.rate - now());
      const i = next++;
      added.set(i, now());
      adds.push(utils.addJob("noop", { i }));
    }
    await Promise.all(adds);
    await until(() => [...added.keys()].every((i) => started.has(i)), "latency jobs to start");
    return [...added.entries()].map(([i, at]) => started.get(i) - at);
  }

  async function drainRun(count) {
    const before = completed;
    const specs = Array.from({ length: count }, () => ({ identifier: "noop", payload: { i: -1 } }));
    await utils.addJobs(specs);
    const t0 = now();
    await until(() => completed - before >= count, "drain jobs to complete");
    return count / ((lastComplete - t0) / 1000);
  }

  const out = { version: require("graphile-worker/package.json").version, latency_ms: [], drain_jobs_per_s: [] };
  if (cfg.warmup) {
    await latencyRun(Math.max(5, Math.floor(cfg.latency_jobs / 5)));
    await drainRun(Math.max(10, Math.floor(cfg.drain_jobs / 5)));
  }
  for (let r = 0; r < cfg.runs; r += 1) out.latency_ms.push(await latencyRun(cfg.latency_jobs));
  for (let r = 0; r < cfg.runs; r += 1) out.drain_jobs_per_s.push(await drainRun(cfg.drain_jobs));

  await runner.stop();
  await utils.release();
  await workerPool.end();
  await addPool.end();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
