/** Where the daemon listens and which token to present, found exactly as the daemon finds them. */

import { join } from "node:path";

/** An environment to read: `process.env` unless a test passes its own. */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * The daemon's socket path: `explicit`, else `$PTYD_SOCKET`, else `$XDG_RUNTIME_DIR/ptyd/ptyd.sock`, else
 * `/tmp/ptyd-$UID/ptyd.sock` (the rule of `ptyd.daemon.default_socket_path`; an empty variable counts as unset).
 */
export function resolveSocketPath(explicit?: string, env: Environment = process.env): string {
  if (explicit) return explicit;
  const fromEnv = env["PTYD_SOCKET"];
  if (fromEnv) return fromEnv;
  const runtime = env["XDG_RUNTIME_DIR"];
  if (runtime) return join(runtime, "ptyd", "ptyd.sock");
  if (typeof process.getuid !== "function") {
    throw new Error("cannot find the ptyd socket: no process.getuid() here; pass socketPath");
  }
  return `/tmp/ptyd-${process.getuid()}/ptyd.sock`;
}

/** The agent token: `explicit`, else `$PTYD_TOKEN`, else undefined (register one with `registerAgent`). */
export function resolveToken(explicit?: string, env: Environment = process.env): string | undefined {
  return explicit || env["PTYD_TOKEN"] || undefined;
}
