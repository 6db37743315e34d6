/** One daemon session as the seed's `PtyBackendSession`, its synchronous members served from kept state. */

import type { PtydClient } from "../client.js";
import type { TerminalEvent } from "../protocol.js";
import { camel, sessionInfo, sessionStatus, snake } from "./convert.js";
import { Coalesced, PtydSendOperation } from "./operation.js";
import { TranscriptCopy } from "./transcript.js";
import type {
  PtyBackendSession,
  PtyReadRequest,
  PtyReadResult,
  PtySendOperation,
  PtySendRequest,
  PtySendResult,
  PtySessionInfo,
  PtySessionStatus,
  PtySignal,
  PtySignalResult,
} from "./types.js";

const PAGE_BYTES = 1024 * 1024; // the daemon's max_read_bytes: a refresh reads pages this large

/** What a session is told at spawn or attach. */
export interface SessionStart {
  readonly id: string;
  readonly motd: string;
  readonly pid: number | null;
  readonly rows: number;
  readonly status: PtySessionStatus;
  /** Lines of transcript to keep (and, on attach, to fetch) for `read()`. */
  readonly retainedLines: number;
}

/**
 * A live session of the daemon. `status()`, `read()`, and each operation's `readOutput()` and `cancel()` answer
 * from state the adapter keeps current from the daemon's events; see the README section "Where a synchronous
 * answer can lag" for exactly how far behind each can be.
 */
export class PtydBackendSession implements PtyBackendSession {
  /** The daemon's session id: keep it to {@link PtydBackend.attach} again after a reload. */
  readonly id: string;
  readonly motd: string;
  readonly pid?: number;
  private current: PtydSendOperation | undefined;
  private state: PtySessionStatus;
  private rows: number;
  private readonly retainedLines: number;
  private readonly transcript: TranscriptCopy;
  private readonly refresher = new Coalesced(() => this.refreshTail());
  private closedHeard: (() => void) | undefined;
  private readonly closedEvent: Promise<void>;

  /**
   * @param client - the backend's client
   * @param start - what spawn or attach learned
   * @param untilHeard - awaits an event of the backend's stream (until the stream ends), keeping Node running
   */
  constructor(
    readonly client: PtydClient,
    start: SessionStart,
    private readonly untilHeard: (heard: Promise<void>) => Promise<void> | undefined,
  ) {
    this.id = start.id;
    this.motd = start.motd;
    if (start.pid !== null) this.pid = start.pid;
    this.state = start.status;
    this.rows = start.rows;
    this.retainedLines = start.retainedLines;
    this.transcript = new TranscriptCopy(start.retainedLines);
    this.closedEvent = new Promise((resolve) => {
      this.closedHeard = resolve;
    });
  }

  /** The send started last through this object, or the one running when the session was attached. */
  get currentSend(): PtySendOperation | undefined {
    return this.current;
  }

  /** Fetch the newest `lines` of the transcript into the copy (at spawn and attach). */
  async fetchTranscript(lines: number): Promise<void> {
    const first = await this.client.terminalRead(this.id, { start_line: -lines, max_lines: 1, max_bytes: 256 });
    this.transcript.dropBelow(first.start_line);
    await this.fetchFrom(first.start_line, first.total_lines);
    this.transcript.markScreen(Math.max(first.start_line, first.total_lines - this.rows));
  }

  /** Follow a send already running in the daemon (found at attach). */
  adopt(operationId: string): void {
    this.current = new PtydSendOperation(this, Promise.resolve(operationId));
  }

  startSend(request: PtySendRequest): PtySendOperation {
    const started = this.client
      .terminalSend(this.id, request.input, { ...snake(request), wait: false })
      .then((send) => send.operation_id);
    const operation = new PtydSendOperation(this, started);
    this.current = operation;
    return operation;
  }

  read(request: PtyReadRequest): PtyReadResult {
    return this.transcript.page(request);
  }

  async signal(signal: PtySignal): Promise<PtySignalResult> {
    return camel(await this.client.terminalSignal(this.id, signal));
  }

  /** Change the terminal size (the program gets SIGWINCH); resolves with the session's new state. */
  async resize(cols: number, rows: number): Promise<PtySessionInfo> {
    const info = await this.client.terminalResize(this.id, cols, rows);
    this.rows = info.rows;
    return sessionInfo(info);
  }

  status(): PtySessionStatus {
    return this.state;
  }

  /**
   * End the session's whole process tree (`terminal_close`); resolves once the daemon forgot it and, when the
   * event stream is live, once its exit was heard (so `status()` then reports it). Idempotent.
   */
  async close(reason: string): Promise<void> {
    const closed = await this.client.terminalClose(this.id, reason);
    if (closed.closed) await this.untilHeard(this.closedEvent);
  }

  /** @internal One of the backend's events for this session. */
  heard(event: TerminalEvent): void {
    switch (event.kind) {
      case "output":
        if (!this.transcript.applyOutput(event)) void this.refresher.run().catch(() => undefined);
        void this.current?.outputArrived().catch(() => undefined);
        break;
      case "input_wait":
        void this.refresher.run().catch(() => undefined);
        break;
      case "session_exit":
        if (event.status != null) this.state = sessionStatus(event.status);
        void this.refresher.run().catch(() => undefined);
        break;
      case "send_settled":
        if (event.result != null) this.state = sessionStatus(event.result.session_status);
        break;
      case "session_closed":
        this.closedHeard?.();
        break;
    }
  }

  /** @internal Events may have been missed (the stream was replaced): catch up. */
  resync(): void {
    void this.refresher.run().catch(() => undefined);
    void this.current?.outputArrived().catch(() => undefined);
  }

  /** @internal A send settled: bring status and the transcript copy up to date before its result is out. */
  async settle(result: PtySendResult): Promise<void> {
    this.state = result.sessionStatus;
    await this.refresher.run().catch(() => undefined);
  }

  /**
   * Re-read the screen (lines a program may still redraw), and before it what the copy misses or read off an
   * earlier screen without an output event confirming it since (at most the lines it keeps).
   */
  private async refreshTail(): Promise<void> {
    const tail = await this.client.terminalRead(this.id, { start_line: -this.rows, max_lines: this.rows });
    this.transcript.applyPage(tail);
    // Lines the copy misses before the screen (events cut short by a flood): only as many as it keeps.
    this.transcript.dropBelow(tail.start_line - this.retainedLines);
    await this.fetchFrom(this.transcript.staleFrom, tail.start_line);
    this.transcript.markScreen(tail.start_line);
  }

  /** Fetch lines `[start, end)` into the copy, a page at a time. */
  private async fetchFrom(start: number, end: number): Promise<void> {
    for (let line = start; line < end; ) {
      const page = await this.client.terminalRead(this.id, {
        start_line: line,
        max_lines: Math.min(end - line, 100_000),
        max_bytes: PAGE_BYTES,
      });
      this.transcript.applyPage(page);
      if (page.next_line <= line) return;
      line = page.next_line;
    }
  }
}
