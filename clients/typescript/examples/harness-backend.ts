import { PtydClient } from "ptyd-client";
import { PtydBackend, type PtyBackend } from "ptyd-client/backend";

// The harness registers its agent once and keeps the token: it is what outlives the harness's reloads.
const agent = new PtydClient();
const { token } = await agent.agentRegister("my-harness");

const backend = new PtydBackend({ token }) satisfies PtyBackend; // was: new LocalPtyBackend()
const session = await backend.spawn({ cwd: process.cwd(), env: { PS1: "$ " } });
const { viewport, waitReason } = await session.startSend({ input: "echo tests passed\n" }).done;
console.log(waitReason, JSON.stringify(viewport));

// After a reload (a new process, the same token): the sessions are still there.
const reloaded = new PtydBackend({ token });
const sessions = await Promise.all((await reloaded.list()).map((info) => reloaded.attach(info.sessionId)));
console.log(sessions.length, "session found again, pid", sessions[0]?.pid === session.pid ? "unchanged" : "changed");

await agent.agentRelease(); // the harness is done: its sessions close, its token is revoked
backend.disconnect();
reloaded.disconnect();
agent.close();
