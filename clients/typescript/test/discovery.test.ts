/** Socket discovery gives the path the daemon itself would listen on, for every environment. */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";

import { resolveSocketPath, resolveToken, type Environment } from "../src/index.js";

const CASES: Environment[] = [
  { PTYD_SOCKET: "/x/explicit.sock", XDG_RUNTIME_DIR: "/run/user/7" },
  { XDG_RUNTIME_DIR: "/run/user/7" },
  { PTYD_SOCKET: "", XDG_RUNTIME_DIR: "/run/user/7" },
  { PTYD_SOCKET: "", XDG_RUNTIME_DIR: "" },
  {},
];

test("an explicit path wins over the environment", () => {
  assert.equal(resolveSocketPath("/a/b.sock", { PTYD_SOCKET: "/c.sock" }), "/a/b.sock");
});

test("without $PTYD_SOCKET or $XDG_RUNTIME_DIR the socket is under /tmp/ptyd-$UID", () => {
  assert.equal(resolveSocketPath(undefined, {}), `/tmp/ptyd-${process.getuid?.()}/ptyd.sock`);
});

// $PTYD_PYTHON is the daemon's interpreter (the pytest runner passes it): ask the daemon's own rule.
const python = process.env["PTYD_PYTHON"];
test("each environment gives the path ptyd.config.default_socket_path gives", { skip: !python && "no $PTYD_PYTHON" }, () => {
  for (const env of CASES) {
    const daemon = spawnSync(
      python!,
      ["-c", "from ptyd.config import default_socket_path; print(default_socket_path(), end='')"],
      { env: { PATH: process.env["PATH"], ...env }, encoding: "utf8" },
    );
    assert.equal(daemon.status, 0, daemon.stderr);
    assert.equal(resolveSocketPath(undefined, env), daemon.stdout, JSON.stringify(env));
  }
});

test("the token comes from the argument, else $PTYD_TOKEN", () => {
  assert.equal(resolveToken("a", { PTYD_TOKEN: "b" }), "a");
  assert.equal(resolveToken(undefined, { PTYD_TOKEN: "b" }), "b");
  assert.equal(resolveToken(undefined, { PTYD_TOKEN: "" }), undefined);
});
