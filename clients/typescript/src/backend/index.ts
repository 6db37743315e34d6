/**
 * `ptyd-client/backend`: the harness's `PtyBackend` interface with the seed's exact shapes, served by ptyd.
 *
 * @example
 * ```ts
 * import { PtydBackend } from "ptyd-client/backend";
 * const backend = new PtydBackend(); // $PTYD_SOCKET / $PTYD_TOKEN, or { socketPath, token, type }
 * const session = await backend.spawn({ env: { PS1: "$ " } });
 * const result = await session.startSend({ input: "ls\n" }).done;
 * console.log(result.waitReason, result.viewport);
 * ```
 */

export { PtydBackend, type PtydBackendOptions } from "./backend.js";
export { PtydSendOperation } from "./operation.js";
export { PtydBackendSession } from "./session.js";
export type * from "./types.js";
