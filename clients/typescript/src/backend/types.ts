/**
 * The harness's PTY vocabulary (deepseek-harness `packages/pty/pty/src/types.ts`) with the seed's exact shapes:
 * camelCase fields and the seed's sync/async signatures. Types the seed names without defining are the daemon's
 * wire types with their fields in camelCase, derived from `protocol.ts` so they follow the daemon.
 *
 * These names deliberately differ in shape from the snake_case aliases of the same names in `protocol.ts` (the
 * promise-based `PtydClient` API); import them from `ptyd-client/backend`.
 */

import type {
  SendResult,
  SessionInfo,
  TerminalOpenParams,
  TerminalOutputResult,
  TerminalReadParams,
  TerminalReadResult,
  TerminalSendParams,
  TerminalSignalParams,
  TerminalSignalResult,
} from "../protocol.js";

/** `snake_case` to `camelCase`, as a type. */
export type CamelKey<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelKey<Tail>>}`
  : S;

/** A wire type with every field name in camelCase, nested objects and arrays included. */
export type Camel<T> = T extends readonly (infer U)[]
  ? Camel<U>[]
  : T extends object
    ? { [K in keyof T as K extends string ? CamelKey<K> : K]: Camel<T[K]> }
    : T;

// --- the seed's own declarations ---------------------------------------------------------------------------

/** Why one interactive send returned control to its caller. */
export type PtyWaitReason = "stdin_read" | "inferred_idle" | "timeout" | "session_exit";

/** Top-level PTY process status, independent of a send's wait reason. */
export type PtySessionStatus =
  | { kind: "running" }
  | { kind: "exited"; exitCode: number | null; signal: NodeJS.Signals | null };

/** Replaceable provider for one PTY session type. */
export interface PtyBackend {
  /** Stable type selected by `PtySpawnRequest.type`. */
  readonly type: string;
  /** Create an unpublished session or reject after cleaning partial resources. */
  spawn(spec: PtyBackendSpawnSpec): Promise<PtyBackendSession>;
}

/** Backend-owned live session retained by `PtyService`. */
export interface PtyBackendSession {
  /** Initial bounded terminal output returned from `terminal_open`. */
  readonly motd: string;
  /** Top-level process id when one exists. */
  readonly pid?: number;
  /** Start one exclusive send operation. */
  startSend(request: PtySendRequest): PtySendOperation;
  /** Read one bounded page from retained scrollback. */
  read(request: PtyReadRequest): PtyReadResult;
  /** Signal the verified foreground process group. */
  signal(signal: PtySignal): Promise<PtySignalResult>;
  /** Observe top-level process status. */
  status(): PtySessionStatus;
  /** Idempotently close the captured owned process tree and await quiescence. */
  close(reason: string): Promise<void>;
}

/** Live backend-owned send; exactly one may be active per PTY session. */
export interface PtySendOperation {
  /** Resolves after readiness, timeout, cancellation, or top-level process exit. */
  done: Promise<PtySendResult>;
  /** Consume output produced since the prior call. */
  readOutput(): PtySendRead;
  /** Request `SIGINT`; returns false after the operation settled. */
  cancel(): boolean;
}

/**
 * Settled result for one foreground or background send: the seed's `viewport`, `waitReason`, `sessionStatus`
 * and `truncated`, and the daemon's other fields (`operationId`, `altScreen`, `foreground`, `lines`,
 * `exitCode`, `cwd`, `passwordPrompt`, `readyBasis`, ...).
 */
export interface PtySendResult extends Omit<Camel<SendResult>, "sessionStatus" | "waitReason"> {
  /** Top-level session status observed at settlement. */
  sessionStatus: PtySessionStatus;
  /** The seed's four reasons: a request through this interface names no wait, so `matched`/`stable` never come. */
  waitReason: PtyWaitReason;
}

// --- the types the seed names, from the daemon's -----------------------------------------------------------

/** What to start (`terminal_open` without the token; the type is the backend's). */
export type PtyBackendSpawnSpec = Camel<Omit<TerminalOpenParams, "token" | "type">>;

/** One send: `input` (add `\n` to submit a line), `timeoutMs`, `idleMs`, `maxBytes`, `requestKey`. */
export type PtySendRequest = Camel<Omit<TerminalSendParams, "token" | "session_id" | "wait" | "until" | "until_stable_ms">>;

/** Output of a send consumed since the prior call; `done` and `result` once it settled. */
export interface PtySendRead extends Omit<Camel<TerminalOutputResult>, "result"> {
  result: PtySendResult | null;
}

/** One page of the retained transcript: `startLine` (negative: from the end), `maxLines`, `maxBytes`. */
export type PtyReadRequest = Camel<Omit<TerminalReadParams, "token" | "session_id">>;

/** One bounded page: `lines`, `startLine`, `nextLine`, `firstRetainedLine`, `totalLines`, `truncated`. */
export type PtyReadResult = Camel<TerminalReadResult>;

/** A signal name (`"SIGINT"`, `"INT"`) or number. */
export type PtySignal = TerminalSignalParams["signal"];

/** Which foreground group got which signal: `delivered`, `pgid`, `signal`. */
export type PtySignalResult = Camel<TerminalSignalResult>;

/** What one of the agent's sessions is and is doing (`terminal_status`/`terminal_list`), camelCase. */
export interface PtySessionInfo extends Omit<Camel<SessionInfo>, "status"> {
  status: PtySessionStatus;
}
