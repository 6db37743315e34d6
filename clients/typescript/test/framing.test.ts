/** NDJSON framing: lines split anywhere, characters split anywhere. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { LineDecoder } from "../src/index.js";

const TEXT = '{"a":"日本語 é 🎉"}\n{"b":2}\n{"c":"ü"}\n';

test("every split of the byte stream into two chunks yields the same lines", () => {
  const bytes = Buffer.from(TEXT, "utf8");
  const expected = TEXT.split("\n").slice(0, -1);
  for (let cut = 0; cut <= bytes.length; cut += 1) {
    const decoder = new LineDecoder();
    const lines = [...decoder.push(bytes.subarray(0, cut)), ...decoder.push(bytes.subarray(cut))];
    assert.deepEqual(lines, expected, `cut at byte ${cut}`);
    assert.equal(decoder.bufferedBytes, 0);
  }
});

test("a stream fed one byte at a time yields the same lines", () => {
  const decoder = new LineDecoder();
  const lines: string[] = [];
  for (const byte of Buffer.from(TEXT, "utf8")) lines.push(...decoder.push(Buffer.from([byte])));
  assert.deepEqual(lines, TEXT.split("\n").slice(0, -1));
});

test("a partial line is held until its newline arrives", () => {
  const decoder = new LineDecoder();
  assert.deepEqual(decoder.push(Buffer.from('{"a":')), []);
  assert.equal(decoder.bufferedBytes, 5);
  assert.deepEqual(decoder.push(Buffer.from('1}\n{"b"')), ['{"a":1}']);
  assert.deepEqual(decoder.push(Buffer.from(":2}\n")), ['{"b":2}']);
});
