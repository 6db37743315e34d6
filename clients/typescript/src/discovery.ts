/** Where the daemon listens and which token to present, found exactly as the daemon finds them. */

import { join } from "node:path";

/** An environment to read: `process.env` unless a test passes its own. */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * The daemon's socket path: `explicit`, else `$PTYD_SOCKET`, else `$XDG_RUNTIME_DIR/ptyd/ptyd.sock`, else
 * `/tmp/ptyd-$UID/ptyd.sock` (the rule of `ptyd.config.default_socket_path`; an empty variable counts as unset).
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

/** A daemon on another machine, reached as `ssh host ptyd dial-stdio`: `ssh://[user@]host[:port]`. */
export interface SshHost {
  readonly url: string;
  readonly host: string;
  readonly user: string | undefined;
  readonly port: number | undefined;
}

/** Parse `ssh://[user@]host[:port]`; anything else throws. */
export function parseSshHost(url: string): SshHost {
  const match = /^ssh:\/\/(?:([^@/:]+)@)?([^@/:]+)(?::(\d+))?\/?$/.exec(url);
  if (match === null) throw new Error(`want ssh://[user@]host[:port], not ${JSON.stringify(url)}`);
  return { url, user: match[1], host: match[2]!, port: match[3] === undefined ? undefined : Number(match[3]) };
}

/**
 * The daemon on another machine this client reaches, if any: `explicit`, else `$PTYD_HOST` when no socket path
 * was given (`unix:///path` there names a local socket instead, returned as that path).
 */
export function resolveHost(
  explicit: string | undefined,
  socketPath: string | undefined,
  env: Environment = process.env,
): SshHost | string | undefined {
  const spec = explicit || (socketPath ? undefined : env["PTYD_HOST"]);
  if (!spec) return undefined;
  if (spec.startsWith("unix://")) return spec.slice("unix://".length);
  return parseSshHost(spec);
}

/**
 * The ssh command line that runs `ptyd dial-stdio` on `host`: `$PTYD_SSH_COMMAND` (default `ssh`, split on
 * spaces) and `$PTYD_REMOTE_PTYD` (default `ptyd`), as the Python client and ptyctl build it.
 */
export function sshArgv(host: SshHost, env: Environment = process.env): string[] {
  const argv = (env["PTYD_SSH_COMMAND"] || "ssh").split(/\s+/).filter((word) => word !== "");
  argv.push("-T", "-o", "BatchMode=yes");
  if (host.user !== undefined) argv.push("-l", host.user);
  if (host.port !== undefined) argv.push("-p", String(host.port));
  const remote = (env["PTYD_REMOTE_PTYD"] || "ptyd").split(/\s+/).filter((word) => word !== "");
  return [...argv, "--", host.host, [...remote, "dial-stdio"].map(shellQuote).join(" ")];
}

function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\"'\"'")}'`;
}
