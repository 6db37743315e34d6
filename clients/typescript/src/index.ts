/**
 * ptyd-client: persistent PTY sessions from the ptyd daemon, over its Unix socket (or ssh to another machine).
 *
 * @example
 * ```ts
 * const client = new PtydClient();
 * await client.agentRegister("me");
 * const shell = await client.open();
 * console.log((await shell.send("ls\n")).viewport);
 * ```
 */

export {
  PtydClient,
  type ClientOptions,
  type IntegrateOptions,
  type OpenRpcDocument,
  type SendOptions,
} from "./client.js";
export {
  parseSshHost,
  resolveHost,
  resolveSocketPath,
  resolveToken,
  sshArgv,
  type Environment,
  type SshHost,
} from "./discovery.js";
export * from "./errors.js";
export { EventStream, type SubscribeOptions } from "./events.js";
export { LineDecoder } from "./framing.js";
export * from "./protocol.js";
export { SendOperation, Session } from "./session.js";
