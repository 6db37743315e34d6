/**
 * Event streams: the `terminal_event` notifications of one subscription, on a connection of its own.
 *
 * A subscription lives as long as its connection, so each stream owns one: the client's requests are never held
 * up behind a burst of events, and closing the stream ends the subscription.
 */

import { Connection, type Notification } from "./connection.js";
import type { TerminalEvent, TerminalSubscribeParams, TerminalSubscribeResult } from "./protocol.js";

/** What to hear: one session or all of the agent's (current and future), and whether its output too. */
export interface SubscribeOptions {
  /** One session; default every session of the agent, the ones opened later included. */
  sessionId?: string;
  /** Also `output` events: completed transcript lines as they appear (they are not consumed). Default false. */
  output?: boolean;
  /**
   * Called with each event as it arrives, in order, instead of queueing it for `next()`/`for await`. Events
   * that arrive before `subscribe()` resolves are delivered here too.
   */
  onEvent?: (event: TerminalEvent) => void;
}

interface Waiter {
  resolve(event: TerminalEvent | undefined): void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * One subscription's events: `for await (const event of stream)`, `await stream.next(timeoutMs)`, or an
 * `onEvent` callback. Iteration ends when the stream closes (by {@link close}, or the daemon going away).
 * While something awaits an event the stream keeps Node running; otherwise it does not.
 */
export class EventStream implements AsyncIterable<TerminalEvent> {
  /** The daemon's id for this subscription. */
  subscriptionId = "";
  /** Resolves once the stream ended: with `undefined` after {@link close}, else with what closed it. */
  readonly ended: Promise<Error | undefined>;
  private readonly queue: TerminalEvent[] = [];
  private readonly waiters = new Set<Waiter>();
  private closedByUs = false;
  private isEnded = false;
  private holds = 0;
  private endedWith!: (cause: Error | undefined) => void;

  private constructor(
    private readonly connection: Connection,
    private readonly token: string,
    private readonly onEvent: ((event: TerminalEvent) => void) | undefined,
  ) {
    this.ended = new Promise((resolve) => {
      this.endedWith = resolve;
    });
    connection.onNotification = (notification) => this.receive(notification);
    connection.onClose = (cause) => this.end(cause);
  }

  /** Open a connection of its own with `dial` and subscribe; rejects (and closes it) if the daemon refuses. */
  static async open(
    dial: () => Promise<Connection>,
    token: string,
    options: SubscribeOptions = {},
  ): Promise<EventStream> {
    const connection = await dial();
    const stream = new EventStream(connection, token, options.onEvent);
    const params: TerminalSubscribeParams = { token, output: options.output ?? false };
    if (options.sessionId !== undefined) params.session_id = options.sessionId;
    try {
      const result = (await connection.request("terminal_subscribe", params)) as TerminalSubscribeResult;
      stream.subscriptionId = result.subscription_id;
    } catch (error) {
      stream.close();
      throw error;
    }
    return stream;
  }

  /** True once the stream closed; queued events can still be taken with {@link next}. */
  get closed(): boolean {
    return this.isEnded;
  }

  /** The next event; `undefined` once the stream ended and its queue is empty, or after `timeoutMs`. */
  next(timeoutMs?: number): Promise<TerminalEvent | undefined> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.isEnded) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const waiter: Waiter = { resolve, timer: undefined };
      if (timeoutMs !== undefined) waiter.timer = setTimeout(() => this.release(waiter, undefined), timeoutMs);
      this.waiters.add(waiter);
      this.connection.hold(true);
    });
  }

  /**
   * `promise`, keeping Node running until it settles, as an awaited {@link next} does: for a caller that awaits
   * an event through `onEvent` (a socket that is not held would let Node exit before the event is read).
   */
  awaiting<T>(promise: Promise<T>): Promise<T> {
    this.holds++;
    this.connection.hold(true);
    return promise.finally(() => {
      this.holds--;
      this.letGo();
    });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TerminalEvent> {
    for (let event = await this.next(); event !== undefined; event = await this.next()) yield event;
  }

  /** `terminal_unsubscribe` on this stream's connection, then close it; false if the daemon had ended it. */
  async unsubscribe(): Promise<boolean> {
    if (this.isEnded) return false;
    const params = { token: this.token, subscription_id: this.subscriptionId };
    try {
      return ((await this.connection.request("terminal_unsubscribe", params)) as { unsubscribed: boolean })
        .unsubscribed;
    } finally {
      this.close();
    }
  }

  /** Close the connection, which ends the subscription. Idempotent. */
  close(): void {
    this.closedByUs = true;
    this.connection.close();
  }

  private receive(notification: Notification): void {
    if (notification.method !== "terminal_event") return;
    const event = notification.params as TerminalEvent;
    if (this.onEvent !== undefined) {
      this.onEvent(event);
      return;
    }
    const [waiter] = this.waiters;
    if (waiter !== undefined) this.release(waiter, event);
    else this.queue.push(event);
  }

  private release(waiter: Waiter, event: TerminalEvent | undefined): void {
    clearTimeout(waiter.timer);
    this.waiters.delete(waiter);
    this.letGo();
    waiter.resolve(event);
  }

  private letGo(): void {
    if (this.waiters.size === 0 && this.holds === 0) this.connection.hold(false);
  }

  private end(cause: Error): void {
    this.isEnded = true;
    for (const waiter of [...this.waiters]) this.release(waiter, undefined);
    this.endedWith(this.closedByUs ? undefined : cause);
  }
}
