/**
 * `PtydClient`: one method per daemon RPC over one multiplexed connection, reconnecting once when the
 * connection is found dropped, and never typing a send's input twice.
 */

import { randomUUID } from "node:crypto";

import { Connection } from "./connection.js";
import { resolveHost, resolveSocketPath, resolveToken, type Environment, type SshHost } from "./discovery.js";
import { ConnectionLostError, ProtocolError, UnauthorizedError } from "./errors.js";
import { EventStream, type SubscribeOptions } from "./events.js";
import type {
  AgentRegisterResult,
  AgentListResult,
  AgentReleaseResult,
  DaemonInfoResult,
  MethodName,
  Methods,
  PtyReadRequest,
  PtySendRequest,
  PtySignal,
  PtySpawnRequest,
  SendResult,
  SendStarted,
  SessionInfo,
  TerminalScreenResult,
  TerminalScreenshotResult,
  TerminalCancelResult,
  TerminalCloseResult,
  TerminalIntegrateParams,
  TerminalOpenResult,
  TerminalOutputResult,
  TerminalReadResult,
  TerminalSendParams,
  TerminalSignalResult,
  TerminalUnsubscribeResult,
  TerminalWaitResult,
} from "./protocol.js";
import { RETRY_SAFE_METHODS } from "./protocol.js";
import { SendOperation, Session } from "./session.js";

/** How to reach the daemon and who to be. */
export interface ClientOptions {
  /** Socket path; default `$PTYD_SOCKET`, `$XDG_RUNTIME_DIR/ptyd/ptyd.sock`, `/tmp/ptyd-$UID/ptyd.sock`. */
  socketPath?: string;
  /**
   * The daemon of another machine, `ssh://[user@]host[:port]`, reached by running `ssh host ptyd dial-stdio`
   * (`~/.ssh/config` applies; `$PTYD_SSH_COMMAND` replaces `ssh`, `$PTYD_REMOTE_PTYD` the remote `ptyd`).
   * Default `$PTYD_HOST` when no `socketPath` is given.
   */
  host?: string;
  /** Agent token; default `$PTYD_TOKEN`. Without one, call {@link PtydClient.agentRegister} first. */
  token?: string;
  /** Environment to read the defaults from (default `process.env`). */
  env?: Environment;
}

/** Options of one send: everything but the session, the input and `wait` (see {@link PtySendRequest}). */
export type SendOptions = Omit<PtySendRequest, "input" | "wait">;

/** Options of `terminal_integrate`: its wait and viewport bounds. */
export type IntegrateOptions = Omit<TerminalIntegrateParams, "token" | "session_id">;

/** `rpc.discover`: an OpenRPC 1.3 document (not typed further here: `protocol.ts` is generated from it). */
export type OpenRpcDocument = Record<string, unknown>;

// Methods the client repeats on a new connection when the old one dropped mid-request: the daemon's table
// (OpenRPC `x-retry-safe`, generated into protocol.ts). terminal_send is not among them: see terminalSend.
const REPEATABLE: ReadonlySet<string> = new Set(RETRY_SAFE_METHODS);

/**
 * A client of one ptyd daemon, acting as one agent (one token).
 *
 * Requests are promises and run concurrently on one connection. The connection opens on the first call; a
 * connection found dropped is replaced once per call; an idle client does not keep Node running. Call
 * {@link close} when done.
 */
export class PtydClient {
  /** The socket this client talks to, or the `ssh://` host. */
  readonly socketPath: string;
  private readonly host: SshHost | undefined;
  private readonly env: Environment;
  /** The agent token sent with every `terminal_*` call (set by {@link agentRegister} if unset). */
  token: string | undefined;
  private connection: Connection | undefined;
  private readonly streams = new Map<string, EventStream>();
  private connecting: Promise<Connection> | undefined;
  private closed = false;

  /** A client for the daemon at `options.socketPath` (or the default socket). Does not connect yet. */
  constructor(options: ClientOptions = {}) {
    const env = options.env ?? process.env;
    const host = resolveHost(options.host, options.socketPath, env);
    this.env = env;
    this.host = typeof host === "object" ? host : undefined;
    this.socketPath = typeof host === "object" ? host.url : resolveSocketPath(host ?? options.socketPath, env);
    this.token = resolveToken(options.token, env);
  }

  /** True while the client holds an open connection (otherwise the next call opens one). */
  get connected(): boolean {
    return this.connection?.isOpen ?? false;
  }

  /**
   * Close the connection and every event stream of this client; requests in flight reject with
   * `ConnectionLostError`. The client cannot be reused.
   */
  close(): void {
    this.closed = true;
    this.connection?.close();
    this.connection = undefined;
    for (const stream of this.streams.values()) stream.close();
  }

  /**
   * Call one daemon method by its wire name with snake_case params (the typed methods below wrap this).
   * A repeatable method whose connection dropped mid-request is sent once more on a new connection.
   */
  async call<M extends MethodName>(method: M, params: Methods[M]["params"]): Promise<Methods[M]["result"]>;
  async call(method: "rpc.discover", params: Record<string, never>): Promise<OpenRpcDocument>;
  async call(method: string, params: object): Promise<unknown> {
    try {
      return await (await this.connect()).request(method, params);
    } catch (error) {
      if (!(error instanceof ConnectionLostError) || !REPEATABLE.has(method) || this.closed) throw error;
      return (await this.connect()).request(method, params);
    }
  }

  /** A new connection to the daemon: its socket, or `ssh host ptyd dial-stdio`. */
  private dial(): Promise<Connection> {
    return this.host ? Promise.resolve(Connection.openSsh(this.host, this.env)) : Connection.open(this.socketPath);
  }

  private connect(): Promise<Connection> {
    if (this.closed) return Promise.reject(new Error("this PtydClient was closed"));
    if (this.connection?.isOpen) return Promise.resolve(this.connection);
    this.connecting ??= this.dial()
      .then((connection) => {
        if (this.closed) connection.close();
        else this.connection = connection;
        return connection;
      })
      .finally(() => {
        this.connecting = undefined;
      });
    return this.connecting;
  }

  private requireToken(): string {
    if (this.token) return this.token;
    throw new UnauthorizedError({
      code: -32001,
      message: "no agent token: pass { token }, set $PTYD_TOKEN, or call agentRegister() first",
      data: { kind: "unauthorized" },
    });
  }

  private ref(sessionId: string): { token: string; session_id: string } {
    return { token: this.requireToken(), session_id: sessionId };
  }

  // --- agents ----------------------------------------------------------------------------------------------

  /** `agent_register`: mint an agent and its token; the client adopts the token if it has none. */
  async agentRegister(name?: string): Promise<AgentRegisterResult> {
    const result = await this.call("agent_register", name === undefined ? {} : { name });
    this.token ??= result.token;
    return result;
  }

  /** `agent_release`: close every session of this client's agent and revoke its token. */
  async agentRelease(): Promise<AgentReleaseResult> {
    const result = await this.call("agent_release", { token: this.requireToken() });
    this.token = undefined;
    return result;
  }

  /** `agent_list`: the registered agents (every one with the operator token; else this client's agent alone). */
  async agentList(): Promise<AgentListResult> {
    return this.call("agent_list", { token: this.requireToken() });
  }

  // --- sessions --------------------------------------------------------------------------------------------

  /** `terminal_open`, as a {@link Session} handle: start a program on a new PTY, resolved once it is ready. */
  async open(request: PtySpawnRequest = {}): Promise<Session> {
    const opened = await this.terminalOpen(request);
    return new Session(this, opened.session_id, opened);
  }

  /** A handle on an existing session (say, one opened before a reload), without a call. */
  session(sessionId: string): Session {
    return new Session(this, sessionId);
  }

  /** `terminal_open`: start a program on a new PTY; resolves once it is ready, with its first screen. */
  terminalOpen(request: PtySpawnRequest = {}): Promise<TerminalOpenResult> {
    return this.call("terminal_open", { ...request, token: this.requireToken() });
  }

  /**
   * `terminal_send`: write `input` verbatim (add `\n` to submit a line) and resolve when the program is ready
   * for more, with the rendered output and why the wait ended. With `wait: false`, resolve at once with the
   * operation id (see {@link sendBackground}).
   *
   * Every send carries a `request_key` (a random one unless given). If the connection drops before the answer,
   * whether the daemon wrote the input is unknown, so the client does not simply send it again: on a new
   * connection it repeats the request with the same key and `wait: false`, which the daemon answers with the
   * original operation without writing anything (or, if it never received the send, by starting it now), then
   * awaits that operation with `terminal_wait`. The input is written once either way.
   */
  terminalSend(sessionId: string, input: string, options?: SendOptions & { wait?: true }): Promise<SendResult>;
  terminalSend(sessionId: string, input: string, options: SendOptions & { wait: false }): Promise<SendStarted>;
  terminalSend(
    sessionId: string,
    input: string,
    options?: SendOptions & { wait?: boolean },
  ): Promise<SendResult | SendStarted>;
  async terminalSend(
    sessionId: string,
    input: string,
    options: SendOptions & { wait?: boolean } = {},
  ): Promise<SendResult | SendStarted> {
    const params: TerminalSendParams = {
      ...options,
      ...this.ref(sessionId),
      input,
      request_key: options.request_key ?? randomUUID(),
    };
    try {
      return await this.call("terminal_send", params);
    } catch (error) {
      if (!(error instanceof ConnectionLostError) || this.closed) throw error;
      return this.resumeSend(params);
    }
  }

  private async resumeSend(params: TerminalSendParams): Promise<SendResult | SendStarted> {
    const started = await this.call("terminal_send", { ...params, wait: false });
    if (!("operation_id" in started) || "viewport" in started) {
      throw new ProtocolError(`terminal_send with wait=false answered ${JSON.stringify(started)}`);
    }
    if (params.wait === false) return started;
    return this.settled(params.session_id, started.operation_id);
  }

  /** Await the result of `operationId`, the session's active or last settled send. */
  async settled(sessionId: string, operationId: string): Promise<SendResult> {
    for (;;) {
      const waited = await this.terminalWait(sessionId);
      if (waited.operation_id !== operationId) {
        throw new ProtocolError(
          `send ${operationId} is no longer the session's current operation (${waited.operation_id}); ` +
            "its result is gone (read the transcript with terminal_read)",
        );
      }
      if (waited.done && waited.result !== null) return waited.result;
    }
  }

  /** `terminal_send` with `wait: false`: start the send in the background and return its handle. */
  async sendBackground(sessionId: string, input: string, options: SendOptions = {}): Promise<SendOperation> {
    const started = await this.terminalSend(sessionId, input, { ...options, wait: false });
    return new SendOperation(this, sessionId, started.operation_id);
  }

  /** `terminal_output`: consume the output of the session's current send produced since the previous call. */
  terminalOutput(sessionId: string): Promise<TerminalOutputResult> {
    return this.call("terminal_output", this.ref(sessionId));
  }

  /** `terminal_wait`: await the active send (or return the last settled one); `done: false` after `timeoutMs`. */
  terminalWait(sessionId: string, timeoutMs?: number): Promise<TerminalWaitResult> {
    const params = timeoutMs === undefined ? this.ref(sessionId) : { ...this.ref(sessionId), timeout_ms: timeoutMs };
    return this.call("terminal_wait", params);
  }

  /** `terminal_cancel`: SIGINT the active send's foreground group, or (none active) what the last send left
   * running in front; `interrupted`, `pgid`, `message` say what it did, `hint` what to do when nothing was. */
  terminalCancel(sessionId: string): Promise<TerminalCancelResult> {
    return this.call("terminal_cancel", this.ref(sessionId));
  }

  /** `terminal_read`: one page of the retained transcript (scrollback, then the screen) as text lines. */
  terminalRead(sessionId: string, request: PtyReadRequest = {}): Promise<TerminalReadResult> {
    return this.call("terminal_read", { ...request, ...this.ref(sessionId) });
  }

  /** `terminal_signal`: signal the verified foreground process group (`"SIGINT"`, `"INT"` or a number). */
  terminalSignal(sessionId: string, signal: PtySignal): Promise<TerminalSignalResult> {
    return this.call("terminal_signal", { ...this.ref(sessionId), signal });
  }

  /** `terminal_resize`: change the terminal size (the program gets SIGWINCH); resolves with the new state. */
  terminalResize(sessionId: string, cols: number, rows: number): Promise<SessionInfo> {
    return this.call("terminal_resize", { ...this.ref(sessionId), cols, rows });
  }

  /** `terminal_screen`: the visible screen now (a full-screen program's too), read without writing to it. */
  terminalScreen(sessionId: string): Promise<TerminalScreenResult> {
    return this.call("terminal_screen", this.ref(sessionId));
  }

  /** `terminal_screenshot`: the visible screen as a PNG (base64 in `png`) with its colours, attributes and cursor
   * (daemon protocol 6). */
  terminalScreenshot(sessionId: string, fontSize?: number): Promise<TerminalScreenshotResult> {
    return this.call("terminal_screenshot", {
      ...this.ref(sessionId),
      ...(fontSize !== undefined ? { font_size: fontSize } : {}),
    });
  }

  /** `terminal_status`: what the session is and what it is doing now. */
  terminalStatus(sessionId: string): Promise<SessionInfo> {
    return this.call("terminal_status", this.ref(sessionId));
  }

  /** `terminal_list`: this agent's sessions. */
  async terminalList(): Promise<SessionInfo[]> {
    return (await this.call("terminal_list", { token: this.requireToken() })).sessions;
  }

  /** `terminal_close`: end the session's whole process tree; idempotent (`closed: false` the second time). */
  terminalClose(sessionId: string, reason?: string): Promise<TerminalCloseResult> {
    const params = reason === undefined ? this.ref(sessionId) : { ...this.ref(sessionId), reason };
    return this.call("terminal_close", params);
  }

  /** `terminal_integrate`: install shell integration into the bash now at the prompt (say, one reached by ssh). */
  terminalIntegrate(sessionId: string, options: IntegrateOptions = {}): Promise<SendResult> {
    return this.call("terminal_integrate", { ...options, ...this.ref(sessionId) });
  }

  // --- events ----------------------------------------------------------------------------------------------

  /**
   * `terminal_subscribe` on a connection of its own: `terminal_event`s of one session (`sessionId`) or of every
   * session of the agent, current and future; with `output: true` also their completed output lines. Iterate the
   * stream (`for await`), await `stream.next()`, or pass `onEvent`. Closing the stream ends the subscription.
   */
  async subscribe(options: SubscribeOptions = {}): Promise<EventStream> {
    if (this.closed) throw new Error("this PtydClient was closed");
    const stream = await EventStream.open(() => this.dial(), this.requireToken(), options);
    this.streams.set(stream.subscriptionId, stream);
    void stream.ended.then(() => this.streams.delete(stream.subscriptionId));
    return stream;
  }

  /**
   * `terminal_unsubscribe`: end one of this client's subscriptions (on its own connection, which then closes);
   * `unsubscribed: false` when it is unknown or already ended.
   */
  async terminalUnsubscribe(subscriptionId: string): Promise<TerminalUnsubscribeResult> {
    const stream = this.streams.get(subscriptionId);
    if (stream !== undefined) return { unsubscribed: await stream.unsubscribe() };
    // Subscriptions belong to the connection that made them: the client's own connection holds none.
    return this.call("terminal_unsubscribe", { token: this.requireToken(), subscription_id: subscriptionId });
  }

  /** `daemon_info`: version, protocol version, pid and totals (with the token when the client has one). */
  daemonInfo(): Promise<DaemonInfoResult> {
    return this.call("daemon_info", this.token ? { token: this.token } : {});
  }

  /** `rpc.discover`: the daemon's OpenRPC document, generated from its own wire types. */
  discover(): Promise<OpenRpcDocument> {
    return this.call("rpc.discover", {});
  }
}
