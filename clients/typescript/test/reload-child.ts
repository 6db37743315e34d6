/**
 * The harness before its reload (run as its own process by conformance.test.ts): opens a session, starts a
 * background send that finishes after this process has gone, prints the session id and exits.
 */

import { PtydBackend } from "../src/backend/index.js";
import { SOCKET, TOKEN, waitUntil } from "./helpers.js";

const backend = new PtydBackend({ socketPath: SOCKET, token: TOKEN });
const session = await backend.spawn({ env: { PS1: "$ " }, name: "before-reload" });
await session.startSend({ input: "echo before reload\n" }).done;
session.startSend({ input: "sleep 1; echo after reload\n" });
await waitUntil(async () => (await backend.client.terminalStatus(session.id)).busy, "the send to start");
backend.disconnect();
process.stdout.write(session.id + "\n");
