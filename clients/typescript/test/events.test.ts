/** Event streams against a real daemon: what each subscription hears, in order, and how it ends. */

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { PtydClient, UnauthorizedError, type EventStream, type TerminalEvent } from "../src/index.js";
import { SOCKET, client, shell } from "./helpers.js";

const c = client();
after(() => c.close());

/** Events of `stream` until those seen satisfy `enough`; fails after `timeoutMs` without. */
async function collect(stream: EventStream, enough: (seen: TerminalEvent[]) => boolean, timeoutMs = 10_000) {
  const seen: TerminalEvent[] = [];
  const deadline = Date.now() + timeoutMs;
  while (!enough(seen)) {
    const event = await stream.next(Math.max(1, deadline - Date.now()));
    if (event === undefined) throw new Error(`no matching event; saw ${JSON.stringify(seen)}`);
    seen.push(event);
  }
  return seen;
}

/** Events of `stream` until one satisfies `last` (included). */
function until(stream: EventStream, last: (e: TerminalEvent) => boolean): Promise<TerminalEvent[]> {
  return collect(stream, (seen) => seen.length > 0 && last(seen.at(-1)!));
}

describe("a session's event stream", () => {
  test("carries its output lines and the settled send, numbered from 1", async () => {
    const s = await shell(c);
    const stream = await s.subscribe({ output: true });
    try {
      const sent = await s.send("for i in 1 2 3; do echo line$i; done\n");
      const events = await until(stream, (e) => e.kind === "send_settled");
      assert.deepEqual(
        events.map((e) => e.seq),
        events.map((_, i) => i + 1),
      );
      assert.ok(events.every((e) => e.session_id === s.id && e.subscription_id === stream.subscriptionId));
      const settled = events.at(-1);
      assert.equal(settled?.operation_id, sent.operation_id);
      assert.equal(settled?.result?.viewport, sent.viewport);
      // The settle can overtake the last output batch (they are timed separately): read on until line3.
      const output = events.filter((e) => e.kind === "output");
      if (!output.some((e) => e.output?.includes("line3"))) {
        output.push(...(await until(stream, (e) => e.kind === "output" && e.output!.includes("line3"))));
      }
      const text = output.map((e) => e.output ?? "").join("");
      assert.match(text, /line1\nline2\nline3\n/);
      const first = output[0]!.lines!;
      assert.equal(first.start_line, sent.lines.start_line);
    } finally {
      stream.close();
      await s.close();
    }
  });

  test("reports output after a send settled, and the program waiting for input again", async () => {
    const s = await shell(c);
    const stream = await s.subscribe({ output: true });
    try {
      const sent = await s.send("(sleep 0.2; echo late) &\n");
      // The input_wait and the output batch that woke the watch are timed separately: either may come first.
      const late = (e: TerminalEvent): boolean => e.kind === "output" && e.output!.includes("late\n");
      const waits = (seen: TerminalEvent[]): TerminalEvent[] => seen.filter((e) => e.kind === "input_wait");
      const events = await collect(stream, (seen) => seen.some(late) && waits(seen).length > 0);
      assert.ok(events.every((e) => e.kind !== "send_settled" || e.operation_id === sent.operation_id));
      assert.equal(waits(events)[0]?.password_prompt, false);
    } finally {
      stream.close();
      await s.close();
    }
  });

  test("without output: true hears no output events", async () => {
    const s = await shell(c);
    const stream = await s.subscribe();
    try {
      await s.send("echo quiet\n");
      const events = await until(stream, (e) => e.kind === "send_settled");
      assert.deepEqual(
        events.map((e) => e.kind),
        ["send_settled"],
      );
    } finally {
      stream.close();
      await s.close();
    }
  });
});

describe("an agent-wide stream", () => {
  test("hears a session opened later exit and close, through an onEvent callback", async () => {
    const heard: TerminalEvent[] = [];
    const stream = await c.subscribe({ onEvent: (event) => heard.push(event) });
    try {
      const s = await shell(c);
      const sent = await s.send("exit 3\n");
      assert.equal(sent.wait_reason, "session_exit");
      await s.close();
      const mine = heard.filter((e) => e.session_id === s.id).map((e) => e.kind);
      assert.ok(mine.includes("session_exit"), JSON.stringify(mine));
      assert.equal(mine.at(-1), "session_closed");
      const exit = heard.find((e) => e.session_id === s.id && e.kind === "session_exit");
      assert.deepEqual(exit?.status, { kind: "exited", exit_code: 3, signal: null });
      // onEvent consumes every event: nothing is left queued for next().
      assert.equal(await stream.next(0), undefined);
    } finally {
      stream.close();
    }
  });
});

describe("ending a stream", () => {
  test("terminalUnsubscribe ends it on its own connection, once", async () => {
    const stream = await c.subscribe();
    const id = stream.subscriptionId;
    assert.match(id, /^sub-/);
    assert.deepEqual(await c.terminalUnsubscribe(id), { unsubscribed: true });
    assert.equal(await stream.ended, undefined);
    assert.equal(stream.closed, true);
    assert.deepEqual(await c.terminalUnsubscribe(id), { unsubscribed: false });
    const events: TerminalEvent[] = [];
    for await (const event of stream) events.push(event);
    assert.deepEqual(events, []);
  });

  test("close() ends a pending next() and iteration", async () => {
    const stream = await c.subscribe();
    const pending = stream.next();
    stream.close();
    assert.equal(await pending, undefined);
    assert.equal(await stream.ended, undefined);
  });

  test("closing the client closes its streams", async () => {
    const own = client();
    const stream = await own.subscribe();
    own.close();
    assert.equal(await stream.ended, undefined);
  });

  test("a bad token is refused and leaves no stream", async () => {
    const stranger = new PtydClient({ socketPath: SOCKET, token: "not-a-token" });
    await assert.rejects(stranger.subscribe(), UnauthorizedError);
    stranger.close();
  });
});

describe("terminal_integrate", () => {
  test("installs shell integration into a bash ptyd did not set up: sends then report exit_code and cwd", async () => {
    const s = await c.open({ type: "exec", argv: ["sh"], env: { PS1: "$ " }, cwd: "/tmp" });
    try {
      await s.send("exec bash --norc --noprofile\n");
      const before = await s.send("false\n");
      assert.equal(before.exit_code ?? null, null);
      const installed = await s.integrate({ timeout_ms: 10_000 });
      assert.equal(installed.wait_reason, "stdin_read");
      const after = await s.send("(exit 7)\n");
      assert.equal(after.exit_code, 7);
      assert.equal(after.cwd, "/tmp");
    } finally {
      await s.close();
    }
  });
});
