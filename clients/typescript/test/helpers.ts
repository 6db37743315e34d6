/**
 * Test harness: the real daemon named by $PTYD_SOCKET and $PTYD_TOKEN (tests/clients/test_typescript_client.py
 * starts it), and a Unix-socket proxy in front of it that can cut or swallow traffic, to drop connections at
 * exactly the moment a test needs.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { PtydClient, type Session } from "../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`$${name} is not set: run these tests through tests/clients/test_typescript_client.py`);
  return value;
}

/** The real daemon's socket. */
export const SOCKET = required("PTYD_SOCKET");
/** A token of an agent registered for this run. */
export const TOKEN = required("PTYD_TOKEN");

/** A client of the real daemon, as the test run's agent. */
export function client(): PtydClient {
  return new PtydClient({ socketPath: SOCKET, token: TOKEN });
}

/** Open a bash session with a plain `$ ` prompt. */
export function shell(c: PtydClient): Promise<Session> {
  return c.open({ env: { PS1: "$ " }, name: "ts-test" });
}

/** Every transcript line of a session. */
export async function transcript(session: Session): Promise<string[]> {
  return (await session.read({ start_line: 0, max_lines: 100_000, max_bytes: 16 * 1024 * 1024 })).lines;
}

/** Poll a condition about the outside world until it holds or the deadline passes. */
export async function waitUntil(
  predicate: () => boolean | Promise<boolean>,
  message: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${message}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A private directory for sockets, removed by the returned function. */
export function privateDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "ptyd-ts-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** What the proxy does with one chunk a client sent: pass it on, or drop it and cut that connection. */
export type Verdict = "forward" | "swallow-and-cut";

/** A Unix-socket proxy to the daemon, one upstream connection per client connection. */
export class Proxy {
  /** Client connections accepted so far. */
  accepted = 0;
  /** Decides each client chunk's fate; forwards everything by default. */
  inspect: (chunk: Buffer) => Verdict = () => "forward";
  /** Milliseconds to hold back each chunk the daemon sent (later chunks of that connection wait behind it). */
  delayDown: (chunk: Buffer) => number = () => 0;
  private readonly pairs = new Set<{ downstream: Socket; upstream: Socket }>();

  private constructor(
    private readonly server: Server,
    readonly path: string,
  ) {}

  /** Listen on `path` and relay to the daemon at `upstreamPath`. */
  static start(path: string, upstreamPath: string = SOCKET): Promise<Proxy> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      const proxy = new Proxy(server, path);
      server.on("connection", (downstream) => proxy.relay(downstream, upstreamPath));
      server.once("error", reject);
      server.listen(path, () => resolve(proxy));
    });
  }

  /** Connections open right now. */
  get live(): number {
    return this.pairs.size;
  }

  private relay(downstream: Socket, upstreamPath: string): void {
    this.accepted += 1;
    const upstream = createConnection({ path: upstreamPath });
    const pair = { downstream, upstream };
    this.pairs.add(pair);
    const end = (): void => {
      this.pairs.delete(pair);
      downstream.destroy();
      upstream.destroy();
    };
    downstream.on("data", (chunk: Buffer) => {
      if (this.inspect(chunk) === "forward") upstream.write(chunk);
      else end();
    });
    let behind = Promise.resolve();
    upstream.on("data", (chunk: Buffer) => {
      const ms = this.delayDown(chunk);
      behind = behind.then(() => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined));
      void behind.then(() => downstream.write(chunk));
    });
    for (const socket of [downstream, upstream]) {
      socket.on("error", end);
      socket.on("close", end);
    }
  }

  /** Cut every connection, as a daemon restart or a network fault would. */
  cutAll(): void {
    for (const { downstream, upstream } of [...this.pairs]) {
      downstream.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** Stop listening and cut everything. */
  close(): Promise<void> {
    this.cutAll();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A verdict that swallows (and cuts on) the first chunk naming `method`, and forwards everything else. */
export function swallowFirst(method: string): (chunk: Buffer) => Verdict {
  let done = false;
  return (chunk) => {
    if (!done && chunk.includes(`"method":"${method}"`)) {
      done = true;
      return "swallow-and-cut";
    }
    return "forward";
  };
}
