/**
 * NDJSON framing: one JSON value per `\n`-terminated line.
 *
 * Lines are split on the byte 0x0A before decoding. In UTF-8 that byte never occurs inside a multi-byte
 * character, so a character split across two socket chunks stays whole: only complete lines are decoded.
 */

const NEWLINE = 0x0a;

/** Accumulates socket chunks and yields every complete line, decoded as UTF-8. */
export class LineDecoder {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  /** Bytes received that do not yet end in a newline. */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  /** Feed one chunk; returns the lines it completed (without their newline), in order. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(NEWLINE); nl !== -1; nl = chunk.indexOf(NEWLINE, start)) {
      const piece = chunk.subarray(start, nl);
      if (this.pendingBytes > 0) {
        this.pending.push(piece);
        lines.push(Buffer.concat(this.pending).toString("utf8"));
        this.pending = [];
        this.pendingBytes = 0;
      } else {
        lines.push(piece.toString("utf8"));
      }
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.pending.push(chunk.subarray(start));
      this.pendingBytes += chunk.length - start;
    }
    return lines;
  }
}

/** Encode one message as a frame: compact JSON and a newline (JSON.stringify escapes any newline inside). */
export function encodeFrame(message: unknown): string {
  return JSON.stringify(message) + "\n";
}
