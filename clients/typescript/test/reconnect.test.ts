/**
 * Dropped connections and a daemon that is down, through a proxy in front of the real daemon that cuts a
 * connection at a chosen request.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { ConnectionLostError, DaemonUnavailableError, PtydClient } from "../src/index.js";
import { Proxy, TOKEN, client, privateDir, shell, swallowFirst, transcript, waitUntil } from "./helpers.js";

const dir = privateDir();
let proxy: Proxy;
const direct = client(); // bypasses the proxy, to observe the daemon while the proxied connection is cut

before(async () => {
  proxy = await Proxy.start(join(dir.path, "proxy.sock"));
});
after(async () => {
  direct.close();
  await proxy.close();
  dir.remove();
});

function proxied(): PtydClient {
  return new PtydClient({ socketPath: proxy.path, token: TOKEN });
}

const MARK = "echo mark-$((6*7))\n"; // the command line shows `$((6*7))`, only its output shows `mark-42`

function marks(lines: string[]): number {
  return lines.filter((line) => line === "mark-42").length;
}

describe("a dropped connection", () => {
  test("between calls is replaced by the next call", async () => {
    const c = proxied();
    try {
      const s = await shell(c);
      proxy.cutAll();
      await waitUntil(() => !c.connected, "the client to see the drop");
      const before = proxy.accepted;
      assert.equal((await s.output()).done, true); // terminal_output is not repeatable: this went out once
      assert.equal(proxy.accepted, before + 1);
      await s.close();
    } finally {
      c.close();
    }
  });

  test("during a send the daemon received does not type the input twice", async () => {
    const c = proxied();
    try {
      const s = await shell(c);
      const sending = s.send(`sleep 1; ${MARK}`);
      await waitUntil(async () => (await direct.terminalStatus(s.id)).busy, "the daemon to start the send");
      const before = proxy.accepted;
      proxy.cutAll();
      const result = await sending;
      assert.match(result.viewport, /\nmark-42\n/);
      assert.equal(proxy.accepted, before + 1, "one reconnect");
      assert.equal(marks(await transcript(s)), 1);
      await s.close();
    } finally {
      c.close();
    }
  });

  test("during a send the daemon never received writes it exactly once", async () => {
    const c = proxied();
    try {
      const s = await shell(c);
      proxy.inspect = swallowFirst("terminal_send");
      const result = await s.send(MARK);
      assert.match(result.viewport, /\nmark-42\n/);
      assert.equal(marks(await transcript(s)), 1);
      await s.close();
    } finally {
      proxy.inspect = () => "forward";
      c.close();
    }
  });

  test("during a background send start returns the one operation", async () => {
    const c = proxied();
    try {
      const s = await shell(c);
      proxy.inspect = swallowFirst("terminal_send");
      const op = await s.sendBackground(MARK);
      const result = await op.result();
      assert.equal(result.operation_id, op.operationId);
      assert.equal(marks(await transcript(s)), 1);
      await s.close();
    } finally {
      proxy.inspect = () => "forward";
      c.close();
    }
  });

  test("during a read repeats the read on a new connection", async () => {
    const c = proxied();
    try {
      const s = await shell(c);
      const before = proxy.accepted;
      proxy.inspect = swallowFirst("terminal_read");
      const page = await s.read({ start_line: 0 });
      assert.equal(page.start_line, 0);
      assert.equal(proxy.accepted, before + 1);
      await s.close();
    } finally {
      proxy.inspect = () => "forward";
      c.close();
    }
  });

  test("during a call that cannot be repeated is ConnectionLostError, and the next call reconnects", async () => {
    const c = proxied();
    try {
      const s = await shell(c);
      proxy.inspect = swallowFirst("terminal_output");
      const error = await s.output().catch((e: unknown) => e);
      assert.ok(error instanceof ConnectionLostError);
      assert.equal(error.method, "terminal_output");
      assert.equal((await s.status()).session_id, s.id);
      await s.close();
    } finally {
      proxy.inspect = () => "forward";
      c.close();
    }
  });
});

describe("a daemon that is down", () => {
  test("with no socket file is DaemonUnavailableError naming the path", async () => {
    const path = join(dir.path, "absent.sock");
    const c = new PtydClient({ socketPath: path, token: TOKEN });
    const error = await c.daemonInfo().catch((e: unknown) => e);
    assert.ok(error instanceof DaemonUnavailableError);
    assert.equal(error.socketPath, path);
    assert.equal(error.errno, "ENOENT");
    assert.ok(error.message.includes(path));
  });

  test("with a stale socket file (a killed daemon) is DaemonUnavailableError", async () => {
    const path = join(dir.path, "stale.sock");
    // A process that bound the socket and exited without unlinking it, as a SIGKILLed daemon leaves it.
    const bound = spawnSync(process.execPath, [
      "-e",
      `require("net").createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, "SIGKILL"))`,
    ]);
    assert.equal(bound.signal, "SIGKILL");
    const c = new PtydClient({ socketPath: path, token: TOKEN });
    const error = await c.terminalList().catch((e: unknown) => e);
    assert.ok(error instanceof DaemonUnavailableError);
    assert.equal(error.errno, "ECONNREFUSED");
  });

  test("mid-session is DaemonUnavailableError on the next call, not a hang", async () => {
    const own = await Proxy.start(join(dir.path, "going.sock"));
    const c = new PtydClient({ socketPath: own.path, token: TOKEN });
    try {
      const s = await shell(c);
      await own.close(); // the "daemon" goes away: connections cut, nothing listens
      await waitUntil(() => !c.connected, "the client to see the drop");
      const error = await s.status().catch((e: unknown) => e);
      assert.ok(error instanceof DaemonUnavailableError, String(error));
      await direct.terminalClose(s.id);
    } finally {
      c.close();
    }
  });
});
