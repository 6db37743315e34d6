/**
 * The daemon of another machine through `ssh host ptyd dial-stdio`: run by tests/clients/test_remote.py with a
 * loopback sshd ($PTYD_HOST, $PTYD_SSH_COMMAND and $PTYD_REMOTE_PTYD point at it, $PTYD_TOKEN is an agent's).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { DaemonUnavailableError, PtydClient, parseSshHost, sshArgv } from "../src/index.js";

test("ssh:// URLs name user, host and port, and nothing else", () => {
  assert.deepEqual(parseSshHost("ssh://me@box:2222"), { url: "ssh://me@box:2222", user: "me", host: "box", port: 2222 });
  assert.deepEqual(parseSshHost("ssh://box"), { url: "ssh://box", user: undefined, host: "box", port: undefined });
  assert.throws(() => parseSshHost("tcp://box:1"), /ssh:\/\/\[user@\]host\[:port\]/);
  assert.deepEqual(sshArgv(parseSshHost("ssh://me@box:2"), { PTYD_REMOTE_PTYD: "/opt/my ptyd" }).slice(-7), [
    "-l",
    "me",
    "-p",
    "2",
    "--",
    "box",
    "/opt/my ptyd dial-stdio",
  ]);
});

const skip = !process.env["PTYD_HOST"] && "no $PTYD_HOST (tests/clients/test_typescript_client.py sets one)";

test("$PTYD_HOST reaches the daemon through ssh and runs a session", { skip }, async () => {
  const client = new PtydClient();
  assert.equal(client.socketPath, process.env["PTYD_HOST"]);
  try {
    const shell = await client.open({ env: { PS1: "$ " } });
    const [result, info] = await Promise.all([shell.send("echo ts-over-ssh-$((6*7))\n"), client.daemonInfo()]);
    assert.equal(result.wait_reason, "stdin_read");
    assert.match(result.viewport, /ts-over-ssh-42/);
    assert.ok(info.sessions >= 1);
    await shell.close();
  } finally {
    client.close();
  }
});

test("a host ssh cannot reach is DaemonUnavailableError with ssh's reason", { skip }, async () => {
  const client = new PtydClient({ host: `${process.env["PTYD_HOST"]}:1` });
  try {
    await assert.rejects(client.daemonInfo(), (error: unknown) => {
      assert.ok(error instanceof DaemonUnavailableError, String(error));
      assert.match(error.message, /refused/i);
      return true;
    });
  } finally {
    client.close();
  }
});
