// gRPC's length-prefixed framing of a unary request (issue 29: ShouldRateLimit served on
// node:http2): the one message is found however the DATA frames cut it, a length over the bound
// is refused from its prefix before a byte of the message is held, and a second message is
// reported once it has arrived whole (as grpc-js' StreamDecoder does).
import { describe, expect, it } from 'vitest';
import { FRAMED, RequestFramer, SECOND_MESSAGE, TOO_LARGE } from '../../../src/grpc/request-framer';

function frame(body: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

/** Feeds `bytes` cut at `cuts` (ascending offsets), returning the framer and the last result. */
function feed(bytes: Buffer, cuts: number[], max = 1024): { framer: RequestFramer; results: number[] } {
  const framer = new RequestFramer(max);
  const results: number[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    results.push(framer.push(bytes.subarray(from, cut)));
    from = cut;
  }
  return { framer, results };
}

describe('RequestFramer', () => {
  const body = Buffer.from('hello, rate limit service');
  const whole = frame(body);

  it('takes a message that arrives in one chunk without copying it', () => {
    const { framer, results } = feed(whole, []);
    expect(results).toEqual([FRAMED]);
    expect(framer.message).toEqual(body);
    expect(framer.message!.buffer).toBe(whole.buffer);
    expect(framer.compressed).toBe(false);
  });

  it('finds the message at every cut into two chunks and every cut into three', () => {
    for (let a = 0; a <= whole.length; a++) {
      const { framer } = feed(whole, [a]);
      expect(framer.message, `cut at ${a}`).toEqual(body);
      for (let b = a; b <= whole.length; b++) {
        const three = feed(whole, [a, b]);
        expect(three.framer.message, `cuts at ${a}, ${b}`).toEqual(body);
        expect(three.results.every((r) => r === FRAMED)).toBe(true);
      }
    }
  });

  it('a chunk at a time, byte by byte', () => {
    const { framer } = feed(
      whole,
      Array.from({ length: whole.length - 1 }, (_, i) => i + 1),
    );
    expect(framer.message).toEqual(body);
  });

  it('has no message while the prefix or the body is still arriving', () => {
    expect(feed(whole.subarray(0, 3), []).framer.message).toBeUndefined();
    expect(feed(whole.subarray(0, 9), [5]).framer.message).toBeUndefined();
    expect(feed(Buffer.alloc(0), []).framer.message).toBeUndefined();
  });

  it('takes an empty message (a request of default fields)', () => {
    const { framer } = feed(frame(Buffer.alloc(0)), [2]);
    expect(framer.message).toEqual(Buffer.alloc(0));
  });

  it('reads the compressed flag', () => {
    expect(feed(frame(body, 1), [3]).framer.compressed).toBe(true);
  });

  it('refuses a length over the bound from the prefix alone, even split, and says what was declared', () => {
    const big = Buffer.from([0, 0, 0, 0x04, 0x01]); // 1025
    for (let a = 0; a <= 5; a++) {
      const { framer, results } = feed(big, [a], 1024);
      expect(results.at(-1), `cut at ${a}`).toBe(TOO_LARGE);
      expect(framer.declaredBytes).toBe(1025);
    }
    // The bound itself is allowed.
    const atBound = frame(Buffer.alloc(1024));
    expect(feed(atBound, [], 1024).framer.message).toHaveLength(1024);
  });

  it('says so when a second message has arrived whole: in the same chunk, or later', () => {
    expect(feed(Buffer.concat([whole, frame(body)]), []).results).toEqual([SECOND_MESSAGE]);
    expect(feed(Buffer.concat([whole, frame(body)]), [whole.length]).results).toEqual([FRAMED, SECOND_MESSAGE]);
    expect(feed(Buffer.concat([whole, frame(body)]), [3, whole.length + 7]).results).toEqual([FRAMED, FRAMED, SECOND_MESSAGE]);
    // An empty message is its prefix alone.
    const empty = frame(Buffer.alloc(0));
    for (let a = whole.length; a < whole.length + 5; a++) {
      expect(feed(Buffer.concat([whole, empty]), [a]).results.at(-1), `cut at ${a}`).toBe(SECOND_MESSAGE);
    }
  });

  it('as grpc-js: bytes after the message that are not yet a whole second message are no second message', () => {
    for (const tail of [[0], [0, 0, 0], [0, 0, 0, 0, 9], [0, 0, 0, 0, 9, 1, 2, 3]]) {
      const bytes = Buffer.concat([whole, Buffer.from(tail)]);
      for (let a = 0; a <= bytes.length; a++) {
        const { framer, results } = feed(bytes, [a]);
        expect(results, `${tail.length} bytes, cut at ${a}`).toEqual([FRAMED, FRAMED]);
        expect(framer.message).toEqual(body);
      }
    }
  });

  it('as grpc-js: a prefix after the message over the bound is refused, before a second message in the same chunk', () => {
    const big = Buffer.from([0, 0, 0, 0x04, 0x01]); // 1025
    const { framer, results } = feed(Buffer.concat([whole, big]), [whole.length + 2]);
    expect(results).toEqual([FRAMED, TOO_LARGE]);
    expect(framer.refusedBytes).toBe(1025);
    expect(framer.message).toEqual(body);
    expect(feed(Buffer.concat([whole, frame(body), big]), []).results).toEqual([TOO_LARGE]);
  });
});
