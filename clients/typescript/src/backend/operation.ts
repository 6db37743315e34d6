/** One send as the seed's `PtySendOperation`: a promise for its result, and synchronous output and cancel. */

import type { PtydClient } from "../client.js";
import { sendResult } from "./convert.js";
import type { PtySendOperation, PtySendRead, PtySendResult } from "./types.js";

/** Runs `task` one at a time; calls made while one waits share it, so a burst of triggers costs one run. */
export class Coalesced {
  private chain: Promise<void> = Promise.resolve();
  private queued: Promise<void> | undefined;

  constructor(private readonly task: () => Promise<void>) {}

  /** A run that starts after every call before this one: it sees everything they were called for. */
  run(): Promise<void> {
    if (this.queued !== undefined) return this.queued;
    const next = this.chain.then(() => {
      this.queued = undefined;
      return this.task();
    });
    this.queued = next;
    this.chain = next.catch(() => undefined);
    return next;
  }
}

/** What an operation needs of its session: where to call, and what to do before its result is handed out. */
export interface OperationHost {
  readonly client: PtydClient;
  readonly id: string;
  /** Bring the session's transcript copy and status up to date with a settled send. */
  settle(result: PtySendResult): Promise<void>;
}

/**
 * One send. Its output is consumed from the daemon (`terminal_output`) whenever an `output` event says there is
 * more, and once more after it settled (the prompt line), into a buffer that {@link readOutput} empties; so
 * `readOutput()` lags the daemon by the event batching (~30 ms) plus one round trip, and is complete once
 * {@link done} has resolved.
 */
export class PtydSendOperation implements PtySendOperation {
  readonly done: Promise<PtySendResult>;
  /** The daemon's id for the send, once it has started. */
  operationId: string | undefined;
  private output: string[] = [];
  private result: PtySendResult | undefined;
  private ended = false;
  private readonly started: Promise<string>;
  private readonly pull = new Coalesced(() => this.fetchOutput());

  /**
   * @param host - the session it runs on
   * @param started - resolves with the operation id once the daemon started the send
   */
  constructor(
    private readonly host: OperationHost,
    started: Promise<string>,
  ) {
    this.started = started;
    this.done = this.follow();
    // A harness that never awaits `done` must not crash Node with an unhandled rejection; awaiting still throws.
    this.done.catch(() => undefined);
  }

  private async follow(): Promise<PtySendResult> {
    try {
      const operationId = await this.started;
      this.operationId = operationId;
      void this.outputArrived(); // output the send produced before this point
      const wire = await this.host.client.settled(this.host.id, operationId);
      await this.outputArrived().catch(() => undefined); // the rest, and the prompt line
      const result = sendResult(wire);
      await this.host.settle(result);
      this.result = result;
      return result;
    } finally {
      this.ended = true;
    }
  }

  /** New output may be waiting in the daemon: consume it (one call at a time, bursts coalesced). */
  outputArrived(): Promise<void> {
    if (this.operationId === undefined || this.result !== undefined) return Promise.resolve();
    return this.pull.run();
  }

  private async fetchOutput(): Promise<void> {
    const read = await this.host.client.terminalOutput(this.host.id);
    // Another client's send took over the session: what is left is that send's output, not this one's.
    if (read.operation_id !== this.operationId || read.output === "") return;
    this.output.push(read.output);
    // More may be pouring in: the scrollback drops lines nobody consumed in time, so pull again at once
    // rather than at the next event batch.
    if (!read.done) void this.pull.run().catch(() => undefined);
  }

  readOutput(): PtySendRead {
    const output = this.output.join("");
    this.output = [];
    return {
      operationId: this.operationId ?? null,
      output,
      done: this.ended,
      result: this.result ?? null,
    };
  }

  cancel(): boolean {
    if (this.ended) return false;
    // After the send started, so that the SIGINT is for it; the daemon answers false if it settled meanwhile.
    void this.started.then(() => this.host.client.terminalCancel(this.host.id)).catch(() => undefined);
    return true;
  }
}
