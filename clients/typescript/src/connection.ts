/**
 * One Unix-socket connection to the daemon: requests multiplexed by id, responses matched as they arrive.
 *
 * The daemon runs the requests of one connection concurrently, so a long `terminal_send` and a quick
 * `terminal_read` share the connection and the read's answer comes first.
 */

import { createConnection, type Socket } from "node:net";

import { ConnectionLostError, DaemonUnavailableError, ProtocolError, errorFromWire, type WireError } from "./errors.js";
import { LineDecoder, encodeFrame } from "./framing.js";

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

/** A connected socket and its requests in flight. Closed for good once the socket closes. */
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
    private readonly socket: Socket,
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
    for (const pending of this.pending.values()) pending.reject(new ConnectionLostError(pending.method, cause));
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
