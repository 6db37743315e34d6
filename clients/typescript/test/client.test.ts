/** The client against a real daemon: sessions, every error kind it can provoke, concurrency, background sends. */

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { inflateSync } from "node:zlib";

import {
  BackendNotFoundError,
  InvalidParamsError,
  InvalidRequestError,
  MethodNotFoundError,
  PROTOCOL_VERSION,
  PtydClient,
  PtydError,
  SessionBusyError,
  SessionExitedError,
  SessionNotFoundError,
  SpawnFailedError,
  UnauthorizedError,
  type MethodName,
} from "../src/index.js";
import { SOCKET, TOKEN, client, shell, transcript, waitUntil } from "./helpers.js";

const c = client();
after(() => c.close());

describe("a session", () => {
  test("opens, answers a send with its output, pages its transcript and closes", async () => {
    const s = await shell(c);
    assert.equal(s.opened?.wait_reason, "stdin_read");
    const sent = await s.send("echo $((6*7))\n");
    assert.equal(sent.wait_reason, "stdin_read");
    assert.deepEqual(sent.session_status, { kind: "running" });
    assert.match(sent.viewport, /^\$ echo \$\(\(6\*7\)\)\n42\n\$$/);
    const page = await s.read({ start_line: sent.lines.start_line });
    assert.deepEqual(page.lines.slice(0, 2), ["$ echo $((6*7))", "42"]);
    const again = await s.send("", { keys: ["Up", "Enter"] }); // named keys: the history's last line, run again
    assert.match(again.viewport, /\n42\n\$$/);
    const info = await s.resize(100, 30);
    assert.equal(info.cols, 100);
    assert.equal(info.rows, 30);
    assert.equal((await c.terminalList()).some((x) => x.session_id === s.id), true);
    assert.equal((await s.close()).closed, true);
    assert.equal((await s.close()).closed, false);
    await assert.rejects(s.status(), SessionNotFoundError);
  });

  test("round-trips multi-byte UTF-8 in a response far larger than one socket chunk", async () => {
    const s = await shell(c);
    try {
      await s.send('for i in $(seq 0 2999); do echo "日本語 é ü 🎉 $i"; done\n');
      const lines = await transcript(s);
      const printed = lines.filter((line) => line.startsWith("日本語"));
      assert.deepEqual(
        printed,
        Array.from({ length: 3000 }, (_, i) => `日本語 é ü 🎉 ${i}`),
      );
    } finally {
      await s.close();
    }
  });

  test("reports the daemon's protocol version as the one the types were generated for", async () => {
    const info = await c.daemonInfo();
    assert.equal(info.protocol_version, PROTOCOL_VERSION);
    const doc = await c.discover();
    assert.equal(doc["openrpc"], "1.3.2");
  });

  test("takes its socket and token from $PTYD_SOCKET and $PTYD_TOKEN", async () => {
    const fromEnv = new PtydClient({ env: { PTYD_SOCKET: SOCKET, PTYD_TOKEN: TOKEN } });
    try {
      assert.equal(fromEnv.socketPath, SOCKET);
      assert.ok(Array.isArray(await fromEnv.terminalList()));
    } finally {
      fromEnv.close();
    }
  });
});

describe("errors", () => {
  test("an unknown token is UnauthorizedError", async () => {
    const stranger = new PtydClient({ socketPath: SOCKET, token: "not-a-token" });
    try {
      const error = await stranger.terminalList().catch((e: unknown) => e);
      assert.ok(error instanceof UnauthorizedError);
      assert.ok(error instanceof PtydError);
      assert.equal(error.code, -32001);
      assert.equal(error.kind, "unauthorized");
    } finally {
      stranger.close();
    }
  });

  test("no token at all is UnauthorizedError before anything is sent", async () => {
    const anonymous = new PtydClient({ socketPath: SOCKET, env: {} });
    await assert.rejects(anonymous.terminalList(), UnauthorizedError);
    assert.equal(anonymous.connected, false);
  });

  test("an unknown session is SessionNotFoundError naming the id", async () => {
    const error = await c.terminalStatus("pty-000000").catch((e: unknown) => e);
    assert.ok(error instanceof SessionNotFoundError);
    assert.equal(error.code, -32002);
    assert.equal(error.data["session_id"], "pty-000000");
  });

  test("another agent's session is SessionNotFoundError too", async () => {
    const other = new PtydClient({ socketPath: SOCKET, env: {} });
    try {
      await other.agentRegister("ts-other");
      const theirs = await shell(other);
      await assert.rejects(c.terminalStatus(theirs.id), SessionNotFoundError);
    } finally {
      await other.agentRelease();
      other.close();
    }
  });

  test("agentList shows an agent itself alone", async () => {
    const other = new PtydClient({ socketPath: SOCKET, env: {} });
    try {
      const { agent_id } = await other.agentRegister("ts-listed");
      await shell(other);
      assert.deepEqual(
        (await other.agentList()).agents.map((a) => [a.agent_id, a.name, a.sessions]),
        [[agent_id, "ts-listed", 1]],
      );
    } finally {
      await other.agentRelease();
      other.close();
    }
  });

  test("a send while another is active is SessionBusyError naming the active operation", async () => {
    const s = await shell(c);
    try {
      const op = await s.sendBackground("sleep 30\n");
      const error = await s.send("echo no\n").catch((e: unknown) => e);
      assert.ok(error instanceof SessionBusyError);
      assert.equal(error.data["operation_id"], op.operationId);
      assert.equal(await op.cancel(), true);
      const result = await op.result();
      assert.equal(result.operation_id, op.operationId);
      assert.equal(result.wait_reason, "stdin_read");
    } finally {
      await s.close();
    }
  });

  test("a send to an exited program is SessionExitedError", async () => {
    const s = await c.open({ type: "exec", argv: ["true"] });
    try {
      assert.equal(s.opened?.wait_reason, "session_exit");
      const error = await s.send("x").catch((e: unknown) => e);
      assert.ok(error instanceof SessionExitedError);
      assert.deepEqual(error.data["status"], { kind: "exited", exit_code: 0, signal: null });
    } finally {
      await s.close();
    }
  });

  test("a program that cannot start is SpawnFailedError with the OS reason", async () => {
    const error = await c.open({ type: "exec", argv: ["/nonexistent/ptyd-ts-test"] }).catch((e: unknown) => e);
    assert.ok(error instanceof SpawnFailedError);
    assert.equal(error.data["reason"], "ENOENT");
  });

  test("an unknown session type is BackendNotFoundError", async () => {
    await assert.rejects(c.open({ type: "no-such-backend" }), BackendNotFoundError);
  });

  test("out-of-range or meaningless params are InvalidParamsError naming the field", async () => {
    const s = await shell(c);
    try {
      const error = await s.resize(1, 30).catch((e: unknown) => e);
      assert.ok(error instanceof InvalidParamsError);
      assert.equal(error.code, -32602);
      assert.match(String(error.data["detail"]), /\$\.cols/);
      const badSignal = await s.signal("SIGNOPE").catch((e: unknown) => e);
      assert.ok(badSignal instanceof InvalidParamsError);
      assert.equal(badSignal.data["field"], "signal");
    } finally {
      await s.close();
    }
  });

  test("an unknown method is MethodNotFoundError", async () => {
    await assert.rejects(c.call("no_such_method" as MethodName, { token: TOKEN }), MethodNotFoundError);
  });

  test("a frame over the daemon's limit fails its own request only (the answer has no id)", async () => {
    const s = await shell(c);
    try {
      const sizes = s.status(); // in flight on the same connection while the oversized frame is refused
      const error = await s.send("🎉".repeat(1_048_576)).catch((e: unknown) => e);
      assert.ok(error instanceof InvalidRequestError);
      assert.equal(error.kind, "frame_too_large");
      assert.equal((await sizes).session_id, s.id);
      assert.equal(c.connected, true);
      assert.equal((await s.send("echo still\n")).wait_reason, "stdin_read");
    } finally {
      await s.close();
    }
  });
});

describe("one connection, many requests", () => {
  test("a read and a status answer while a slow send is still running", async () => {
    const s = await shell(c);
    try {
      let sendDone = false;
      const slow = s.send("sleep 1; echo slow-$((1+1))\n").then((result) => {
        sendDone = true;
        return result;
      });
      // The echo of the input reaches the transcript a moment after the write: poll for it.
      await waitUntil(
        async () => (await s.read()).lines.some((line) => line.includes("sleep 1")),
        "the command's echo in the transcript",
      );
      const info = await s.status();
      assert.equal(sendDone, false, "a read waited for the send");
      assert.equal(info.busy, true);
      const result = await slow;
      assert.match(result.viewport, /\nslow-2\n/);
    } finally {
      await s.close();
    }
  });

  test("concurrent requests each get their own answer", async () => {
    const sessions = await Promise.all([shell(c), shell(c), shell(c)]);
    try {
      const ids = Array.from({ length: 30 }, (_, i) => sessions[i % 3]!.id);
      const infos = await Promise.all(ids.map((id) => c.terminalStatus(id)));
      assert.deepEqual(
        infos.map((info) => info.session_id),
        ids,
      );
      const echoes = await Promise.all(sessions.map((s, i) => s.send(`echo n-$((${i}+100))\n`)));
      echoes.forEach((result, i) => assert.match(result.viewport, new RegExp(`\\nn-${i + 100}\\n`)));
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
    }
  });
});

describe("background sends", () => {
  test("stream output while running, then settle with the operation's result", async () => {
    const s = await shell(c);
    try {
      const op = await s.sendBackground("for i in 1 2 3; do echo line-$i; sleep 0.2; done\n");
      assert.match(op.operationId, /^op-/);
      const collected: string[] = []; // a chunk is whole lines with no final newline: split each, never join
      let done = false;
      let polls = 0;
      await waitUntil(
        async () => {
          const out = await op.output();
          assert.equal(out.operation_id, op.operationId);
          collected.push(...out.output.split("\n"));
          polls += 1;
          done = out.done;
          return done;
        },
        "the background send to settle",
      );
      assert.ok(polls > 1, "output was consumed before the send settled");
      assert.deepEqual(
        collected.filter((line) => line.startsWith("line-")),
        ["line-1", "line-2", "line-3"],
      );
      const result = await op.result();
      assert.equal(result.operation_id, op.operationId);
      assert.equal(result.wait_reason, "stdin_read");
      const waited = await op.wait();
      assert.deepEqual(waited.result, result);
    } finally {
      await s.close();
    }
  });

  test(
    "wait with timeout 0 on a settled send returns its result",
    async () => {
      const s = await shell(c);
      try {
        const result = await s.send("true\n");
        const waited = await s.wait(0);
        assert.equal(waited.done, true);
        assert.deepEqual(waited.result, result);
      } finally {
        await s.close();
      }
    },
  );

  test("wait with a timeout returns done=false while the send runs", async () => {
    const s = await shell(c);
    try {
      const op = await s.sendBackground("sleep 30\n");
      const waited = await op.wait(50);
      assert.equal(waited.done, false);
      assert.equal(waited.operation_id, op.operationId);
      assert.equal(await op.cancel(), true);
      assert.equal((await op.result()).operation_id, op.operationId);
      assert.equal(await op.cancel(), false);
    } finally {
      await s.close();
    }
  });
});

/** An 8-bit RGB or RGBA PNG, not interlaced (what the daemon's Pillow writes), decoded to its pixels. */
function decodePng(png: Buffer): { width: number; height: number; pixel: (x: number, y: number) => number[] } {
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "not a PNG");
  let at = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const data: Buffer[] = [];
  while (at < png.length) {
    const length = png.readUInt32BE(at);
    const type = png.toString("latin1", at + 4, at + 8);
    const body = png.subarray(at + 8, at + 8 + length);
    if (type === "IHDR") {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      assert.equal(body.readUInt8(8), 8, "bit depth");
      assert.equal(body.readUInt8(12), 0, "interlaced");
      const colour = body.readUInt8(9);
      channels = colour === 2 ? 3 : colour === 6 ? 4 : 0;
      assert.ok(channels, `colour type ${colour}`);
    } else if (type === "IDAT") {
      data.push(body);
    }
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw.readUInt8(y * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? out.readUInt8(y * stride + i - channels) : 0;
      const b = y > 0 ? out.readUInt8((y - 1) * stride + i) : 0;
      const c = i >= channels && y > 0 ? out.readUInt8((y - 1) * stride + i - channels) : 0;
      const p = a + b - c;
      const [pa, pb, pc] = [Math.abs(p - a), Math.abs(p - b), Math.abs(p - c)];
      const paeth = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      const predicted = filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : paeth;
      assert.ok(filter <= 4, `filter ${filter}`);
      out.writeUInt8((raw.readUInt8(y * (stride + 1) + 1 + i) + predicted) & 0xff, y * stride + i);
    }
  }
  const pixel = (x: number, y: number): number[] => [...out.subarray((y * width + x) * channels, (y * width + x) * channels + 3)];
  return { width, height, pixel };
}

describe("a screenshot", () => {
  test("is a PNG of the screen: a red cell is red, the cursor cell is drawn", async () => {
    const s = await shell(c);
    try {
      await s.send("printf 'R:\\033[41m    \\033[0m:R\\n'\n");
      const lines = (await s.screen()).lines;
      const y = lines.findIndex((line) => line.startsWith("R:    :R"));
      assert.ok(y >= 0, `the red cells are not on the screen: ${JSON.stringify(lines)}`);
      const shot = await s.screenshot();
      assert.ok(["ghostty", "pyte"].includes(shot.engine));
      const image = decodePng(Buffer.from(shot.png, "base64"));
      assert.deepEqual([image.width, image.height], [shot.width, shot.height]);
      const cw = shot.width / shot.cols;
      const ch = shot.height / shot.rows;
      assert.ok(Number.isInteger(cw) && Number.isInteger(ch), "cells are whole pixels");
      const centre = (x: number, row: number) => image.pixel(x * cw + Math.floor(cw / 2), row * ch + Math.floor(ch / 2));
      for (const x of [2, 3, 4, 5]) assert.deepEqual(centre(x, y), [0xcd, 0, 0], `cell ${x} is not red`);
      assert.ok(shot.cursor_visible);
      assert.equal(lines[shot.cursor_y], "$");
      assert.equal(shot.cursor_x, 2);
      // The cursor is a block in the default foreground colour.
      assert.deepEqual(centre(shot.cursor_x, shot.cursor_y), [0xe5, 0xe5, 0xe5]);
      // A bigger font, a bigger picture of the same cells.
      const big = await c.terminalScreenshot(s.id, 28);
      assert.deepEqual([big.cols, big.rows], [shot.cols, shot.rows]);
      assert.ok(big.width > 1.5 * shot.width);
    } finally {
      await s.close();
    }
  });
});
