// How far PtydBackend's synchronous answers lag the daemon, and what a flood costs readOutput().
// Run after `npm run build`, with a daemon at $PTYD_SOCKET (or the default socket): `node bench/lag.mjs`.
import { PtydBackend } from "../dist/src/backend/index.js";
import { PtydClient } from "../dist/src/index.js";

const tick = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const quantiles = (values) => {
  const a = [...values].sort((x, y) => x - y);
  const at = (q) => a[Math.min(a.length - 1, Math.floor(a.length * q))].toFixed(1);
  return `n=${a.length} p50=${at(0.5)} p95=${at(0.95)} max=${at(1)} ms`;
};

const client = new PtydClient();
await client.agentRegister("lag-bench");
const backend = new PtydBackend({ token: client.token });
const session = await backend.spawn({ env: { PS1: "$ " } });

// Each line carries the wall-clock time it was printed; poll readOutput() and read() every millisecond.
const printedAgo = (stamp) => Date.now() - Number(BigInt(stamp) / 1_000_000n);
const outputLag = [];
const readLag = [];
const seen = new Set();
const op = session.startSend({ input: "for i in $(seq 40); do echo T$(date +%s%N); sleep 0.05; done\n" });
for (;;) {
  const read = op.readOutput();
  for (const m of read.output.matchAll(/^T(\d+)$/gm)) outputLag.push(printedAgo(m[1]));
  for (const line of session.read({ startLine: -50 }).lines) {
    const m = /^T(\d+)$/.exec(line);
    if (m && !seen.has(line)) seen.add(line) && readLag.push(printedAgo(m[1]));
  }
  if (read.done) break;
  await tick(1);
}
console.log(`readOutput() behind the program's print: ${quantiles(outputLag)}`);
console.log(`read() behind the program's print:       ${quantiles(readLag)}`);

// status(): from signal() resolving to status() reporting the exit, no send involved.
const statusLag = [];
const exec = new PtydBackend({ token: client.token, type: "exec" });
for (let i = 0; i < 20; i++) {
  const victim = await exec.spawn({ argv: ["sh", "-c", "read line"] });
  await victim.signal("SIGTERM");
  const t0 = performance.now();
  while (victim.status().kind === "running") await new Promise((resolve) => setImmediate(resolve));
  statusLag.push(performance.now() - t0);
  await victim.close("bench");
}
exec.disconnect();
console.log(`status() after signal() resolved:        ${quantiles(statusLag)}`);

// A send's done against a plain terminal_send of `true`.
const adapter = [];
const plain = [];
for (let i = 0; i < 50; i++) {
  let t0 = performance.now();
  await session.startSend({ input: "true\n" }).done;
  adapter.push(performance.now() - t0);
  t0 = performance.now();
  await client.terminalSend(session.id, "true\n");
  plain.push(performance.now() - t0);
}
console.log(`startSend({input: "true\\n"}).done:       ${quantiles(adapter)}`);
console.log(`client.terminalSend(id, "true\\n"):       ${quantiles(plain)}`);

// A flood: how much of it readOutput() delivers (the daemon keeps the newest 10,000 lines; lines that scroll
// out before they are consumed are gone, as with terminal_output itself).
for (const n of [200_000, 2_000_000]) {
  const t0 = performance.now();
  const flood = session.startSend({ input: `seq 1 ${n}\n` });
  let lines = 0;
  for (;;) {
    const read = flood.readOutput();
    lines += (read.output.match(/^\d+$/gm) ?? []).length;
    if (read.done) break;
    await tick(5);
  }
  console.log(`seq 1 ${n}: readOutput() delivered ${lines} lines; done after ${(performance.now() - t0).toFixed(0)} ms`);
}

await session.close("bench");
await client.agentRelease();
backend.disconnect();
client.close();
