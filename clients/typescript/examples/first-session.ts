import { PtydClient } from "ptyd-client";

const client = new PtydClient(); // socket: $PTYD_SOCKET, else the daemon's default
await client.agentRegister("my-agent"); // or pass { token } / set $PTYD_TOKEN
const shell = await client.open({ env_profile: "agent", env: { PS1: "$ " } });
const result = await shell.send("uname -s\n"); // resolves when bash waits for input again
console.log(result.wait_reason, JSON.stringify(result.viewport));
const build = await shell.sendBackground("sleep 1; echo built\n"); // returns at once
console.log((await build.result()).viewport.split("\n")[1]);
await client.agentRelease(); // closes this agent's sessions and revokes its token
client.close();
