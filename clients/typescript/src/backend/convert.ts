/** Between the daemon's snake_case wire objects and the seed's camelCase ones. */

import { constants } from "node:os";

import type { Exited, Running, SendResult, SessionInfo } from "../protocol.js";
import type { Camel, PtySendResult, PtySessionInfo, PtySessionStatus, PtyWaitReason } from "./types.js";

function camelKey(key: string): string {
  return key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

function snakeKey(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => "_" + letter.toLowerCase());
}

/** A daemon result with every field name in camelCase. Only for results: their keys are all field names. */
export function camel<T>(value: T): Camel<T> {
  if (Array.isArray(value)) return value.map((item: unknown) => camel(item)) as Camel<T>;
  if (typeof value !== "object" || value === null) return value as Camel<T>;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[camelKey(key)] = camel(item);
  return out as Camel<T>;
}

/**
 * A request's top-level field names in snake_case; values are left alone (an `env` keeps its variable names).
 * Fields left undefined are dropped; an unknown field reaches the daemon, which names it in `invalid_params`.
 */
export function snake(request: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) if (value !== undefined) out[snakeKey(key)] = value;
  return out;
}

function signalName(name: string | null): NodeJS.Signals | null {
  // The seed types the signal as a Node signal name; one Node does not know (a real-time signal) reads as null.
  return name !== null && Object.hasOwn(constants.signals, name) ? (name as NodeJS.Signals) : null;
}

/** The daemon's session status in the seed's shape. */
export function sessionStatus(status: Running | Exited): PtySessionStatus {
  if (status.kind === "running") return { kind: "running" };
  return { kind: "exited", exitCode: status.exit_code, signal: signalName(status.signal) };
}

/** A settled send in the seed's shape, with the daemon's other fields in camelCase. */
export function sendResult(result: SendResult): PtySendResult {
  // The seed's PtyWaitReason: requests made through the backend name no wait (PtySendRequest has no until), and
  // the daemon answers matched/stable only to a request that named one.
  const waitReason = result.wait_reason as PtyWaitReason;
  return { ...camel(result), waitReason, sessionStatus: sessionStatus(result.session_status) };
}

/** A session description in camelCase. */
export function sessionInfo(info: SessionInfo): PtySessionInfo {
  return { ...camel(info), status: sessionStatus(info.status) };
}
