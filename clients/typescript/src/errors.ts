/**
 * Errors: one base class carrying the daemon's JSON-RPC code, message and data, one subclass per
 * `error.data.kind`, and the client's own errors for a daemon that is down or a connection that dropped.
 */

import { ERROR_CODES, type ErrorKind } from "./protocol.js";

/** The `error` member of a JSON-RPC response, as the daemon sends it. */
export interface WireError {
  code: number;
  message: string;
  data?: unknown;
}

/** An error the daemon reported: switch on {@link PtydError.kind} or on the subclass. */
export class PtydError extends Error {
  /** The JSON-RPC error code (`-32002`, ...). */
  readonly code: number;
  /** `error.data` as sent (always an object with `kind` for errors ptyd reports on purpose). */
  readonly data: Record<string, unknown>;
  /** `error.data.kind`: the stable name of the condition (`session_not_found`, ...). */
  readonly kind: string;

  /** Wrap one wire error; {@link errorFromWire} picks the subclass. */
  constructor(error: WireError) {
    super(error.message);
    this.name = new.target.name;
    this.code = error.code;
    this.data = isRecord(error.data) ? error.data : {};
    this.kind = typeof this.data["kind"] === "string" ? this.data["kind"] : "error";
  }
}

/** `-32700 parse_error`: the daemon could not parse a line as JSON (a client bug). */
export class ParseError extends PtydError {}
/** `-32600 invalid_request` (also `empty_batch`, `batch_too_large`, `frame_too_large`). */
export class InvalidRequestError extends PtydError {}
/** `-32601 method_not_found`: the daemon has no such method (an older daemon?). */
export class MethodNotFoundError extends PtydError {}
/** `-32602 invalid_params`: wrong type, missing or unknown field; `data.detail` names the field. */
export class InvalidParamsError extends PtydError {}
/** `-32603 internal`: a daemon bug; `data.incident` matches a line in the daemon's log. */
export class InternalError extends PtydError {}
/** `-32001 unauthorized`: the token is missing, unknown or revoked. */
export class UnauthorizedError extends PtydError {}
/** `-32002 session_not_found`: unknown, closed, or another agent's session (the answers are identical). */
export class SessionNotFoundError extends PtydError {}
/** `-32003 session_busy`: a send is already active on the session; `data.operation_id` names it. */
export class SessionBusyError extends PtydError {}
/** `-32004 session_exited`: the session's program has exited; it can be read and closed, not written. */
export class SessionExitedError extends PtydError {}
/** `-32005 backend_not_found`: no backend is registered for the requested session type. */
export class BackendNotFoundError extends PtydError {}
/** `-32006 spawn_failed`: the program could not be started; `data.reason` holds the OS reason. */
export class SpawnFailedError extends PtydError {}
/** `-32007 limit_exceeded`: a configured limit would be exceeded; `data.limit` names it. */
export class LimitExceededError extends PtydError {}
/** `-32018 sandbox_refused`: the sandbox profile asked for is unknown or looser than the agent's own. */
export class SandboxRefusedError extends PtydError {}
/** `-32019 sandbox_unavailable`: the session's profile needs a sandbox or limit this system cannot set up. */
export class SandboxUnavailableError extends PtydError {}
/** `-32030 operation_lost`: the send was in flight when a previous daemon crashed and its result is gone. */
export class OperationLostError extends PtydError {}
/** `-32027 workspace_refused`: a sandboxed session may not work in that cwd; `data.path` names it. */
export class WorkspaceRefusedError extends PtydError {}
/** `-32031 extra_missing`: the daemon lacks the optional part the call needs; `data.extra` names the extra. */
export class ExtraMissingError extends PtydError {}

// Record<ErrorKind, ...>: a kind added to the daemon (and regenerated into protocol.ts) fails the build here
// until it has a class.
const CLASSES: Record<ErrorKind, new (error: WireError) => PtydError> = {
  parse_error: ParseError,
  invalid_request: InvalidRequestError,
  empty_batch: InvalidRequestError,
  batch_too_large: InvalidRequestError,
  frame_too_large: InvalidRequestError,
  method_not_found: MethodNotFoundError,
  invalid_params: InvalidParamsError,
  internal: InternalError,
  unauthorized: UnauthorizedError,
  session_not_found: SessionNotFoundError,
  session_busy: SessionBusyError,
  session_exited: SessionExitedError,
  backend_not_found: BackendNotFoundError,
  spawn_failed: SpawnFailedError,
  limit_exceeded: LimitExceededError,
  sandbox_refused: SandboxRefusedError,
  sandbox_unavailable: SandboxUnavailableError,
  operation_lost: OperationLostError,
  workspace_refused: WorkspaceRefusedError,
  extra_missing: ExtraMissingError,
};

const BY_CODE = new Map<number, new (error: WireError) => PtydError>();
for (const [kind, code] of Object.entries(ERROR_CODES)) {
  if (!BY_CODE.has(code)) BY_CODE.set(code, CLASSES[kind as ErrorKind]);
}

/** The typed error for one wire error: by `data.kind`, else by code, else the base class. */
export function errorFromWire(error: WireError): PtydError {
  const kind = isRecord(error.data) ? error.data["kind"] : undefined;
  const cls =
    (typeof kind === "string" && Object.hasOwn(CLASSES, kind) ? CLASSES[kind as ErrorKind] : undefined) ??
    BY_CODE.get(error.code) ??
    PtydError;
  return new cls(error);
}

/** The daemon's socket cannot be reached: nothing listens there, or the path does not exist. */
export class DaemonUnavailableError extends Error {
  /** The socket path the client tried, or the `ssh://` host. */
  readonly socketPath: string;
  /** The OS error code (`ENOENT`, `ECONNREFUSED`, `EACCES`, ...). */
  readonly errno: string | undefined;

  /** Describe a failed connection to `socketPath` (or an `ssh://` host, with the `reason` ssh gave). */
  constructor(socketPath: string, cause: unknown, reason?: string) {
    const errno = isRecord(cause) && typeof cause["code"] === "string" ? cause["code"] : undefined;
    super(
      reason !== undefined
        ? `ptyd is not available at ${socketPath}: ${reason}`
        : `ptyd is not running at ${socketPath} (${errno ?? String(cause)}): start it with \`ptyd\`, ` +
            "or point the client at the right socket (socketPath option, $PTYD_SOCKET)",
      { cause },
    );
    this.name = "DaemonUnavailableError";
    this.socketPath = socketPath;
    this.errno = errno;
  }
}

/**
 * The connection dropped while this request was in flight, and the method is not safe to repeat
 * (`terminal_output` consumes, `terminal_signal` signals, `terminal_open` starts a program): whether the daemon
 * ran it is unknown. The next call reconnects.
 */
export class ConnectionLostError extends Error {
  /** The method whose outcome is unknown. */
  readonly method: string;

  /** Describe the loss of `method`'s response. */
  constructor(method: string, cause?: unknown) {
    super(`the connection to ptyd dropped during ${method}; its outcome is unknown`, { cause });
    this.name = "ConnectionLostError";
    this.method = method;
  }
}

/** The daemon sent something that is not a JSON-RPC response this client can match to a request. */
export class ProtocolError extends Error {
  /** Describe the unusable response. */
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
