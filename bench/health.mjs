// The health round trip (issue 9): each run starts every worker, warms it
// up, then times n sequential health calls per worker in batches that take
// turns, so a change in the machine's load during the run hits them alike.
// A run's figure for a worker is its median round trip in µs. gapMs leaves
// the workers idle that long before each timed call (the host calls health
// now and then, not in a loop), so wake-up costs count.
import { median, nowMs, row, sleep } from "./lib.mjs";

export async function healthFigure(host, { workers, runs, n, warmup, batch, gapMs, log }) {
  const results = Object.fromEntries(workers.map((w) => [w, []]));
  for (let r = 0; r < runs; r++) {
    const handles = workers.map((w) => host.handle(w));
    await Promise.all(handles.map((h) => h.start()));
    try {
      const times = workers.map(() => []);
      for (const h of handles) for (let k = 0; k < warmup; k++) await health(h);
      for (let b = 0; b * batch < n; b++) {
        for (let j = 0; j < workers.length; j++) {
          const i = (b + j) % workers.length;
          for (let k = 0; k < Math.min(batch, n - b * batch); k++) {
            if (gapMs > 0) await sleep(gapMs);
            const t0 = nowMs();
            await health(handles[i]);
            times[i].push((nowMs() - t0) * 1000);
          }
        }
      }
      workers.forEach((w, i) => results[w].push(median(times[i])));
    } finally {
      await Promise.all(handles.map((h) => h.stop()));
    }
    log(`health run ${r + 1}/${runs}: ${workers.map((w) => `${w} ${results[w][r].toFixed(1)} µs`).join(", ")}`);
  }
  const extra = {};
  for (const w of ["transport", "sdk"]) if (results[w]) extra[w] = median(results[w]);
  const spacing = gapMs > 0 ? `${gapMs} ms apart` : "back to back";
  return [row("health round trip", "µs", results.ours, results.floor, {
    extra, note: `median of ${n} calls ${spacing} after ${warmup} warm-up, per run`,
  })];
}

async function health(handle) {
  const res = await handle.call("health", {});
  if (res?.status !== "ok") throw new Error(`${handle.pluginId}: health answered ${JSON.stringify(res)}`);
}
