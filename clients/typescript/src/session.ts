/** Handles: a `Session` on one PTY session, a `SendOperation` on one background send. */

import type { IntegrateOptions, PtydClient, SendOptions } from "./client.js";
import type { EventStream, SubscribeOptions } from "./events.js";
import type {
  PtyReadRequest,
  PtySignal,
  SendResult,
  SessionInfo,
  TerminalScreenResult,
  TerminalScreenshotResult,
  TerminalCloseResult,
  TerminalOpenResult,
  TerminalOutputResult,
  TerminalReadResult,
  TerminalSignalResult,
  TerminalWaitResult,
} from "./protocol.js";

/** One PTY session of the client's agent. It lives in the daemon: dropping the handle does not close it. */
export class Session {
  /**
   * @param client - the client whose connection and token the calls use
   * @param id - the daemon's session id
   * @param opened - the `terminal_open` result, when this handle came from {@link PtydClient.open}
   */
  constructor(
    readonly client: PtydClient,
    readonly id: string,
    readonly opened?: TerminalOpenResult,
  ) {}

  /** Write `input` verbatim (add `\n` to submit a line) and resolve once the program is ready for more. */
  send(input: string, options: SendOptions = {}): Promise<SendResult> {
    return this.client.terminalSend(this.id, input, { ...options, wait: true });
  }

  /** Start a send in the background; follow it with the returned operation's output/wait/cancel. */
  sendBackground(input: string, options: SendOptions = {}): Promise<SendOperation> {
    return this.client.sendBackground(this.id, input, options);
  }

  /** One page of the retained transcript; by default its last 200 lines. */
  read(request: PtyReadRequest = {}): Promise<TerminalReadResult> {
    return this.client.terminalRead(this.id, request);
  }

  /** Signal the foreground process group (`"SIGINT"`, `"INT"`, `2`). */
  signal(signal: PtySignal): Promise<TerminalSignalResult> {
    return this.client.terminalSignal(this.id, signal);
  }

  /** Change the terminal size; resolves with the session's new state. */
  resize(cols: number, rows: number): Promise<SessionInfo> {
    return this.client.terminalResize(this.id, cols, rows);
  }

  /** The visible screen now (a full-screen program's too), read without writing to the session. */
  screen(): Promise<TerminalScreenResult> {
    return this.client.terminalScreen(this.id);
  }

  /** The visible screen as a PNG (base64 in `png`), with its colours, attributes and cursor. */
  screenshot(fontSize?: number): Promise<TerminalScreenshotResult> {
    return this.client.terminalScreenshot(this.id, fontSize);
  }

  /** What the session is and what it is doing now. */
  status(): Promise<SessionInfo> {
    return this.client.terminalStatus(this.id);
  }

  /** Consume the current send's output produced since the previous call. */
  output(): Promise<TerminalOutputResult> {
    return this.client.terminalOutput(this.id);
  }

  /** Await the current send; with `timeoutMs`, give up then with `done: false`. */
  wait(timeoutMs?: number): Promise<TerminalWaitResult> {
    return this.client.terminalWait(this.id, timeoutMs);
  }

  /** SIGINT the current send's foreground group, or what the last send left running (it timed out or ended
   * inferred_idle); false when nothing was interrupted (`terminalCancel` says why, in `hint`). */
  async cancel(): Promise<boolean> {
    const result = await this.client.terminalCancel(this.id);
    return result.cancelled || (result.interrupted ?? false);
  }

  /** Install shell integration into the bash now at the prompt; afterwards sends report `exit_code` and `cwd`. */
  integrate(options: IntegrateOptions = {}): Promise<SendResult> {
    return this.client.terminalIntegrate(this.id, options);
  }

  /** This session's events on a connection of their own (see {@link PtydClient.subscribe}). */
  subscribe(options: Omit<SubscribeOptions, "sessionId"> = {}): Promise<EventStream> {
    return this.client.subscribe({ ...options, sessionId: this.id });
  }

  /** End the session's whole process tree and forget it; closing twice is not an error. */
  close(reason?: string): Promise<TerminalCloseResult> {
    return this.client.terminalClose(this.id, reason);
  }
}

/** One background send (`wait: false`), the client's side of the harness's `PtySendOperation`. */
export class SendOperation {
  /**
   * @param client - the client that started the send
   * @param sessionId - the session it runs on
   * @param operationId - the daemon's id for it
   */
  constructor(
    readonly client: PtydClient,
    readonly sessionId: string,
    readonly operationId: string,
  ) {}

  /** Consume the output produced since the previous call; `done` and `result` once it settled. */
  output(): Promise<TerminalOutputResult> {
    return this.client.terminalOutput(this.sessionId);
  }

  /** Await settlement for at most `timeoutMs` (no bound if omitted); `done: false` if it is still running. */
  wait(timeoutMs?: number): Promise<TerminalWaitResult> {
    return this.client.terminalWait(this.sessionId, timeoutMs);
  }

  /** Resolve with the settled result (readiness, timeout, cancellation or session exit). */
  result(): Promise<SendResult> {
    return this.client.settled(this.sessionId, this.operationId);
  }

  /** Request SIGINT; once the send settled, SIGINT what it left running (it timed out or ended inferred_idle).
   * False when nothing was interrupted. */
  async cancel(): Promise<boolean> {
    const result = await this.client.terminalCancel(this.sessionId);
    return result.cancelled || (result.interrupted ?? false);
  }
}
