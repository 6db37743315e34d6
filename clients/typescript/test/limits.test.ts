/** LimitExceededError, against a daemon of its own whose agents may hold one session ($PTYD_LIMITED_SOCKET). */

import assert from "node:assert/strict";
import { test } from "node:test";

import { LimitExceededError, PtydClient } from "../src/index.js";

const socketPath = process.env["PTYD_LIMITED_SOCKET"];

test("a session over the agent's limit is LimitExceededError naming the limit", { skip: !socketPath && "no $PTYD_LIMITED_SOCKET" }, async () => {
  const c = new PtydClient({ socketPath: socketPath!, env: {} });
  try {
    await c.agentRegister("ts-limits");
    const first = await c.open({ env: { PS1: "$ " } });
    const error = await c.open().catch((e: unknown) => e);
    assert.ok(error instanceof LimitExceededError);
    assert.equal(error.code, -32007);
    assert.equal(error.data["limit"], "max_sessions_per_agent");
    await first.close();
  } finally {
    await c.agentRelease();
    c.close();
  }
});
