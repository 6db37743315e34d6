/**
 * One Unix-socket connection to the daemon: requests multiplexed by id, responses matched as they arrive.
 *
 * The daemon runs the requests of one connection concurrently, so a long `terminal_send` and a quick
 * `terminal_read` share the connection and the read's answer comes first.
 */

import { spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { createConnection, type Socket } from "node:net";

import { sshArgv, type Environment, type SshHost } from "./discovery.js";
import { ConnectionLostError, DaemonUnavailableError, ProtocolError, errorFromWire, type WireError } from "./errors.js";
import { LineDecoder, encodeFrame } from "./framing.js";

/** What a connection needs of its byte stream: a Unix socket, or ssh's stdin and stdout. */
interface ByteStream {
  on(event: "data", listener: (chunk: Buffer) => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  on(event: "close", listener: () => void): this;
  write(data: string): boolean;
  destroy(): void;
  readonly destroyed: boolean;
  ref(): void;
  unref(): void;
}

/**
 * `ssh host ptyd dial-stdio` as a byte stream. A failure of ssh, or of the remote dial-stdio (no daemon there),
 * is reported as {@link DaemonUnavailableError} with the last line ssh printed.
 */
class SshStream extends EventEmitter implements ByteStream {
  private stderr = "";
  private ended = false;
  private readonly child;

  constructor(host: SshHost, env: Environment) {
    super();
    const [command, ...args] = sshArgv(host, env);
    // detached: a process group of its own, so the terminal's Ctrl-C does not end the link under the client.
    this.child = spawn(command!, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.child.stdout.on("data", (chunk: Buffer) => this.emit("data", chunk));
    this.child.stderr.on("data", (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString("utf8")).slice(-4096);
    });
    this.child.stdin.on("error", () => undefined); // a write after ssh exited: its 'close' reports why
    this.child.on("error", (error) => {
      this.emit("error", new DaemonUnavailableError(host.url, error, `cannot run ssh: ${error.message}`));
    });
    this.child.on("close", (code) => {
      this.ended = true;
      if (code !== 0 && code !== null) {
        let reason = this.stderr.trim().split("\n").pop()?.trim() || `ssh exited with ${code}`;
        // 127/126: the remote shell could not find or run ptyd (a non-interactive ssh command skips ~/.bashrc).
        if (code === 127 || code === 126) {
          const ptyd = process.env["PTYD_REMOTE_PTYD"] || "ptyd";
          reason +=
            ` (the far side cannot run '${ptyd}': a non-interactive ssh command does not read ~/.bashrc, so set ` +
            "PTYD_REMOTE_PTYD to its full path there, e.g. PTYD_REMOTE_PTYD=/path/to/checkout/.venv/bin/ptyd)";
        }
        this.emit("error", new DaemonUnavailableError(host.url, undefined, reason));
      }
      this.emit("close");
    });
  }

  get destroyed(): boolean {
    return this.ended;
  }

  write(data: string): boolean {
    return this.child.stdin.write(data);
  }

  /** End ssh's stdin: the remote dial-stdio and then ssh exit, which emits 'close'. */
  destroy(): void {
    this.child.stdin.end();
  }

  ref(): void {
    this.child.ref();
    for (const pipe of [this.child.stdin, this.child.stdout, this.child.stderr] as unknown as Socket[]) pipe.ref();
  }

  unref(): void {
    this.child.unref();
    for (const pipe of [this.child.stdin, this.child.stdout, this.child.stderr] as unknown as Socket[]) pipe.unref();
  }
}

/** A JSON-RPC notification the daemon sent (a request without an id): `terminal_event` on a subscribed connection. */
export interface Notification {
  readonly method: string;
  readonly params: unknown;
}

interface Pending {
  readonly method: string;
  /** UTF-8 size of the request frame, to match a `frame_too_large` answer (it has no id) to its request. */
  readonly frameBytes: number;
  resolve(result: unknown): void;
  reject(error: Error): void;
}

/** A connected stream and its requests in flight. Closed for good once the stream closes. */
export class Connection {
  private readonly decoder = new LineDecoder();
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closedBy: Error | undefined;
  private held = false;
  /** Called with each notification; without a handler, notifications are ignored. */
  onNotification: ((notification: Notification) => void) | undefined;
  /** Called once when the socket closes, with what closed it. */
  onClose: ((cause: Error) => void) | undefined;

  private constructor(
    private readonly socket: ByteStream,
    readonly socketPath: string,
  ) {
    socket.on("data", (chunk: Buffer) => this.receive(chunk));
    // 'close' always follows 'error'; the error is the cause the pending requests carry.
    socket.on("error", (error) => {
      this.closedBy ??= error;
    });
    socket.on("close", () => this.fail(this.closedBy));
    socket.unref(); // an idle client does not keep the process alive
  }

  /** Connect to `socketPath`; a missing or dead socket gives {@link DaemonUnavailableError}. */
  static open(socketPath: string): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path: socketPath });
      const onError = (error: Error): void => {
        socket.destroy();
        reject(new DaemonUnavailableError(socketPath, error));
      };
      socket.once("error", onError);
      socket.once("connect", () => {
        socket.off("error", onError);
        resolve(new Connection(socket, socketPath));
      });
    });
  }

  /**
   * Reach the daemon of another machine through `ssh host ptyd dial-stdio`. The connection is usable at once;
   * if ssh cannot connect, requests reject with {@link DaemonUnavailableError}.
   */
  static openSsh(host: SshHost, env: Environment): Connection {
    return new Connection(new SshStream(host, env), host.url);
  }

  /** True until the socket closes (the daemon went away, or {@link close} was called). */
  get isOpen(): boolean {
    return this.closedBy === undefined && !this.socket.destroyed;
  }

  /** Requests sent whose response has not arrived. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Send one request; resolves with its result, rejects with the typed error the daemon answered. */
  request(method: string, params: object): Promise<unknown> {
    if (!this.isOpen) return Promise.reject(new ConnectionLostError(method, this.closedBy));
    const id = this.nextId++;
    const frame = encodeFrame({ jsonrpc: "2.0", id, method, params });
    return new Promise((resolve, reject) => {
      this.pending.set(id, { method, frameBytes: Buffer.byteLength(frame), resolve, reject });
      this.socket.ref(); // an awaited answer keeps the process alive
      this.socket.write(frame);
    });
  }

  /** Close the socket; requests in flight reject with {@link ConnectionLostError}. */
  close(): void {
    this.closedBy ??= new Error("the client closed the connection");
    this.socket.destroy();
  }

  private receive(chunk: Buffer): void {
    for (const line of this.decoder.push(chunk)) {
      if (line.trim() === "") continue;
      let message: unknown;
      try {
        message = JSON.parse(line);
      } catch {
        this.abort(new ProtocolError(`ptyd sent a line that is not JSON: ${line.slice(0, 200)}`));
        return;
      }
      this.dispatch(message);
    }
  }

  private dispatch(message: unknown): void {
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      this.abort(new ProtocolError(`ptyd sent a response this client did not ask for: ${JSON.stringify(message)}`));
      return;
    }
    const response = message as { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: WireError };
    if (typeof response.method === "string" && !("id" in response)) {
      this.onNotification?.({ method: response.method, params: response.params });
      return;
    }
    const pending = typeof response.id === "number" ? this.pending.get(response.id) : undefined;
    if (pending === undefined) {
      this.unmatched(response);
      return;
    }
    this.pending.delete(response.id as number);
    this.settled();
    if (response.error !== undefined) pending.reject(errorFromWire(response.error));
    else pending.resolve(response.result);
  }

  /** An answer without a known id: the daemon could not read a request's id. */
  private unmatched(response: { id?: unknown; error?: WireError }): void {
    const error = response.error;
    const data = error?.data as { kind?: unknown; limit?: unknown } | undefined;
    if (error !== undefined && response.id === null && data?.kind === "frame_too_large") {
      // The daemon answers oversized frames in the order it reads them: the oldest oversized one is this one.
      const limit = typeof data.limit === "number" ? data.limit : 0;
      for (const [id, pending] of this.pending) {
        if (pending.frameBytes > limit) {
          this.pending.delete(id);
          this.settled();
          pending.reject(errorFromWire(error));
          return;
        }
      }
    }
    this.abort(new ProtocolError(`ptyd sent a response this client cannot match: ${JSON.stringify(response)}`));
  }

  private settled(): void {
    if (this.pending.size === 0 && !this.held) this.socket.unref();
  }

  /** The stream can no longer be trusted: fail every request with `error` and close. */
  private abort(error: Error): void {
    this.closedBy ??= error;
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
    this.socket.destroy();
  }

  private fail(cause: Error | undefined): void {
    this.closedBy ??= new Error("ptyd closed the connection");
    for (const pending of this.pending.values()) {
      // ssh could not reach the daemon: that is the answer, not a dropped connection worth a retry.
      pending.reject(cause instanceof DaemonUnavailableError ? cause : new ConnectionLostError(pending.method, cause));
    }
    this.pending.clear();
    this.onClose?.(this.closedBy);
  }

  /** Keep the process alive while `held` (someone awaits an event), as an awaited answer does. */
  hold(held: boolean): void {
    this.held = held;
    if (held) this.socket.ref();
    else this.settled();
  }
}
