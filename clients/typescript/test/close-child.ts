/**
 * A harness that closes a session and has nothing else to do (run as its own process by conformance.test.ts,
 * through a proxy that holds the `session_closed` event back): Node must stay up until close() resolves.
 */

import { PtydBackend } from "../src/backend/index.js";
import { SOCKET, TOKEN } from "./helpers.js";

const backend = new PtydBackend({ socketPath: SOCKET, token: TOKEN });
const session = await backend.spawn({ env: { PS1: "$ " }, name: "close-child" });
await session.close("the harness is done");
process.stdout.write(`closed ${session.status().kind}\n`);
backend.disconnect();
