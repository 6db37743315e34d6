/** `PtydBackend`: the seed's `PtyBackend`, served by the ptyd daemon. */

import { PtydClient, type ClientOptions } from "../client.js";
import type { EventStream } from "../events.js";
import type { TerminalEvent } from "../protocol.js";
import { sessionInfo, sessionStatus, snake } from "./convert.js";
import { PtydBackendSession, type SessionStart } from "./session.js";
import type { PtyBackend, PtyBackendSpawnSpec, PtySessionInfo } from "./types.js";

/** The client's options, the backend type, and how much transcript each session keeps for `read()`. */
export interface PtydBackendOptions extends ClientOptions {
  /** The daemon backend type sessions are opened with: `"shell"` (default) or `"exec"` (argv required). */
  type?: string;
  /** Transcript lines each session keeps for the synchronous `read()` (default 10,000, the daemon's default). */
  retainedLines?: number;
}

const DEFAULT_RETAINED_LINES = 10_000;

/**
 * A drop-in `PtyBackend` whose sessions live in the ptyd daemon, so they outlive the harness process: a new
 * process constructing a `PtydBackend` with the same agent token finds them again with {@link list} and
 * {@link attach}.
 *
 * One connection carries requests; a second carries the agent's events (output, settles, exits), which keep
 * each session's synchronous answers current. Neither keeps Node running while nothing is awaited.
 */
export class PtydBackend implements PtyBackend {
  readonly type: string;
  /** The promise-based client underneath (its token is the agent's). */
  readonly client: PtydClient;
  private readonly retainedLines: number;
  private readonly sessions = new Map<string, PtydBackendSession>();
  private events: Promise<EventStream> | undefined;
  private disconnected = false;

  /** A backend on the daemon at `options.socketPath` (default: as the daemon finds its socket). */
  constructor(options: PtydBackendOptions = {}) {
    const { type, retainedLines, ...clientOptions } = options;
    this.client = new PtydClient(clientOptions);
    this.type = type ?? "shell";
    this.retainedLines = retainedLines ?? DEFAULT_RETAINED_LINES;
  }

  /** Start a program on a new PTY; resolves once it is ready for input (the daemon publishes it only then). */
  async spawn(spec: PtyBackendSpawnSpec): Promise<PtydBackendSession> {
    await this.watch();
    const opened = await this.client.terminalOpen({ ...snake(spec), type: this.type });
    const session = this.track({
      id: opened.session_id,
      motd: opened.motd,
      pid: opened.pid,
      rows: opened.rows,
      status: sessionStatus(opened.status),
    });
    await session.fetchTranscript(opened.rows);
    return session;
  }

  /**
   * A session this agent opened earlier, perhaps from another process: its `motd` is the screen now, its
   * transcript copy holds the newest `retainedLines`, and a send still running is its `currentSend`.
   */
  async attach(sessionId: string): Promise<PtydBackendSession> {
    await this.watch();
    const [info, screen] = await Promise.all([
      this.client.terminalStatus(sessionId),
      this.client.terminalScreen(sessionId),
    ]);
    const session = this.track({
      id: info.session_id,
      motd: screen.lines.join("\n").trimEnd(),
      pid: info.pid,
      rows: info.rows,
      status: sessionStatus(info.status),
    });
    if (info.busy && info.operation_id !== null) session.adopt(info.operation_id);
    await session.fetchTranscript(this.retainedLines);
    return session;
  }

  /** Every live session of this agent (of any type), as the daemon describes them. */
  async list(): Promise<PtySessionInfo[]> {
    return (await this.client.terminalList()).map(sessionInfo);
  }

  /** Close this backend's connections. The sessions live on in the daemon; attach to them again later. */
  disconnect(): void {
    this.disconnected = true;
    this.client.close();
    this.sessions.clear();
  }

  private track(start: Omit<SessionStart, "retainedLines">): PtydBackendSession {
    const session = new PtydBackendSession(
      this.client,
      { ...start, retainedLines: this.retainedLines },
      this.untilHeard,
    );
    this.sessions.set(session.id, session);
    return session;
  }

  /** Subscribe to the agent's events once, before the first session, so none of its output is missed. */
  private watch(): Promise<EventStream> {
    if (this.disconnected) return Promise.reject(new Error("this PtydBackend was disconnected"));
    if (this.events !== undefined) return this.events;
    const events = this.client.subscribe({ output: true, onEvent: (event) => this.heard(event) });
    this.events = events;
    events.then(
      (stream) => void stream.ended.then((cause) => cause !== undefined && this.lost(events)),
      () => undefined,
    );
    return events;
  }

  /**
   * Until `heard` resolves or the event stream ends, keeping Node running meanwhile (undefined without a stream):
   * a closing session awaits its `session_closed` event so.
   */
  private readonly untilHeard = (heard: Promise<void>): Promise<void> | undefined =>
    this.events?.then(
      (stream) => stream.awaiting(Promise.race([heard, stream.ended.then(() => undefined)])),
      () => undefined,
    );

  private heard(event: TerminalEvent): void {
    const session = this.sessions.get(event.session_id);
    if (session === undefined) return;
    session.heard(event);
    if (event.kind === "session_closed") this.sessions.delete(event.session_id);
  }

  /**
   * The event stream ended (the daemon dropped the connection, or refused the subscription): subscribe again
   * once, and have every session catch up on what it missed. A failed attempt leaves it to the next spawn.
   */
  private lost(events: Promise<EventStream>): void {
    if (this.events !== events) return;
    this.events = undefined;
    if (this.disconnected || this.sessions.size === 0) return;
    this.watch().then(
      () => {
        for (const session of this.sessions.values()) session.resync();
      },
      () => undefined,
    );
  }
}

