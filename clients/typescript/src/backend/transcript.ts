/**
 * The adapter's copy of a session's retained transcript, so that the seed's synchronous `read()` is answered
 * without a call. It is fed by the daemon's `output` events (completed lines) and by `terminal_read` pages the
 * adapter fetches when a send settles, the program waits for input, or an event was cut short.
 */

import type { TerminalEvent, TerminalReadResult } from "../protocol.js";
import type { PtyReadRequest, PtyReadResult } from "./types.js";

// The daemon's terminal_read defaults and caps (ptyd/api.py, ptyd/config.py), applied the same way here.
const DEFAULT_MAX_LINES = 200;
const MAX_LINES = 100_000;
const DEFAULT_MAX_BYTES = 256 * 1024;

const encoder = new TextEncoder();

/** `text` cut to at most `maxBytes` of UTF-8, never inside a character. */
function cutUtf8(text: string, maxBytes: number): string {
  let used = 0;
  let end = 0;
  for (const char of text) {
    used += encoder.encode(char).length;
    if (used > maxBytes) break;
    end += char.length;
  }
  return text.slice(0, end);
}

/** Transcript lines by number, at most `limit` of the newest kept. */
export class TranscriptCopy {
  /** The number of the first line held in {@link lines}. */
  private base = 0;
  private lines: (string | undefined)[] = [];
  /** Lines the daemon's transcript had when last heard of. */
  private total = 0;
  /** The daemon's first retained line when last heard of. */
  private firstRetained = 0;
  /** Every line below this is held (or was dropped by the bound). */
  private knownEnd = 0;

  /** Keep at most `limit` lines (the daemon keeps 10,000 by default). */
  constructor(private readonly limit: number) {}

  /**
   * Lines from here were read off the screen, where a program may have changed them since (the prompt line
   * gets its command typed onto it); an output event covering them makes them final.
   */
  private screenFrom = 0;

  /** The first line that may be missing or out of date: a refresh starts here. */
  get staleFrom(): number {
    return Math.min(this.knownEnd, this.screenFrom);
  }

  /** Lines from `line` on were just read off the screen. */
  markScreen(line: number): void {
    this.screenFrom = line;
  }

  /** Take one `output` event's lines; false if it was cut short (its lines must be fetched instead). */
  applyOutput(event: TerminalEvent): boolean {
    if (event.lines == null || event.output == null) return true;
    if (event.truncated) return false;
    const { start_line: start, end_line: end } = event.lines;
    const lines = event.output.split("\n").slice(0, end - start);
    if (lines.length !== end - start) return false;
    this.store(start, lines);
    this.total = Math.max(this.total, end);
    if (start <= this.screenFrom) this.screenFrom = Math.max(this.screenFrom, end);
    return true;
  }

  /** Take one `terminal_read` page: its lines, and the daemon's counts as of that read. */
  applyPage(page: TerminalReadResult): void {
    this.firstRetained = page.first_retained_line;
    this.total = page.total_lines;
    this.dropBelow(page.first_retained_line);
    this.store(page.start_line, page.lines);
    // The transcript can shrink (a cleared screen uses fewer rows): forget lines past its end.
    if (this.base + this.lines.length > this.total) this.lines.length = Math.max(0, this.total - this.base);
    this.knownEnd = Math.min(this.knownEnd, this.total);
  }

  private store(start: number, lines: string[]): void {
    if (start + lines.length <= this.base) return;
    if (start < this.base) {
      lines = lines.slice(this.base - start);
      start = this.base;
    }
    const gapStart = this.base + this.lines.length;
    if (start > gapStart) this.lines.length = start - this.base; // unknown lines in between
    for (let i = 0; i < lines.length; i++) this.lines[start - this.base + i] = lines[i];
    this.advanceKnown();
    this.dropBelow(this.base + this.lines.length - this.limit);
  }

  /** Forget the lines before `line` (gone from the daemon, or past the bound); they count as known. */
  dropBelow(line: number): void {
    if (line <= this.base) return;
    this.lines.splice(0, line - this.base);
    this.base = line;
    this.knownEnd = Math.max(this.knownEnd, line);
    this.advanceKnown();
  }

  private advanceKnown(): void {
    while (this.knownEnd < this.base + this.lines.length && this.lines[this.knownEnd - this.base] !== undefined) {
      this.knownEnd += 1;
    }
  }

  /**
   * One page, by the daemon's paging rules (`terminal_read`). Lines the copy does not hold (not received yet,
   * or older than its bound) read as empty and mark the page `truncated`.
   */
  page(request: PtyReadRequest): PtyReadResult {
    const maxLines = Math.min(request.maxLines ?? DEFAULT_MAX_LINES, MAX_LINES);
    const maxBytes = request.maxBytes ?? DEFAULT_MAX_BYTES;
    const total = this.total;
    const first = Math.max(this.firstRetained, this.base);
    let start = request.startLine ?? -maxLines;
    if (start < 0) start = Math.max(total + start, 0);
    const begin = Math.max(start, first);
    const end = Math.min(begin + maxLines, total);
    const lines: string[] = [];
    let missing = false;
    let used = 0;
    for (let n = begin; n < end; n++) {
      const line = this.lines[n - this.base];
      missing ||= line === undefined;
      const text = line ?? "";
      used += encoder.encode(text).length + 1;
      if (used > maxBytes && lines.length > 0) break;
      lines.push(used > maxBytes ? cutUtf8(text, maxBytes - 1) : text);
    }
    return {
      lines,
      startLine: begin,
      nextLine: begin + lines.length,
      firstRetainedLine: first,
      totalLines: total,
      truncated: begin + lines.length < end || begin > start || missing,
    };
  }
}
