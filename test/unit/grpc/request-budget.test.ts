// The budget of bytes of gRPC requests still arriving (issue 26, finding 1): who is reset when
// it is full. Plain objects stand in for node:http2's streams: the budget reads only
// whether END_STREAM was read (_readableState.ended), destroyed and session.
import type { Http2Session, ServerHttp2Stream } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { RequestBudget, STREAM_CHARGE_BYTES } from '../../../src/grpc/request-budget';

interface FakeStream {
  _readableState: { ended: boolean };
  destroyed: boolean;
  session: object;
}

function setup(maxBytes: number): { budget: RequestBudget; reset: FakeStream[]; stream: (session?: object) => FakeStream } {
  const reset: FakeStream[] = [];
  const budget = new RequestBudget(maxBytes, (s) => {
    const f = s as unknown as FakeStream;
    f.destroyed = true;
    reset.push(f);
  });
  const stream = (session: object = {}): FakeStream => ({ _readableState: { ended: false }, destroyed: false, session });
  return { budget, reset, stream };
}

const as = (f: FakeStream): ServerHttp2Stream => f as unknown as ServerHttp2Stream;
const data = (budget: RequestBudget, f: FakeStream, bytes: number): void => budget.onData.call(as(f), Buffer.alloc(bytes));

describe('RequestBudget', () => {
  it('counts each open call and its bytes until it closes', () => {
    const { budget, reset, stream } = setup(1_000_000);
    const a = stream();
    budget.open(as(a));
    data(budget, a, 100);
    data(budget, a, 50);
    expect(budget.heldBytes).toBe(STREAM_CHARGE_BYTES + 150);
    budget.release(as(a));
    expect(budget.heldBytes).toBe(0);
    expect(reset).toEqual([]);
  });

  it('when full, resets the request arriving longest, not the newest', () => {
    const { budget, reset, stream } = setup(3 * STREAM_CHARGE_BYTES + 100_000);
    const old = [stream(), stream()];
    for (const s of old) {
      budget.open(as(s));
      data(budget, s, 50_000);
    }
    const newest = stream();
    budget.open(as(newest));
    data(budget, newest, 300);
    expect(reset).toEqual([old[0]]);
    expect(budget.takeResets()).toBe(1);
    expect(budget.heldBytes).toBe(2 * STREAM_CHARGE_BYTES + 50_300);
  });

  it('a request that has arrived whole only leaves the count: it is not reset', () => {
    const { budget, reset, stream } = setup(2 * STREAM_CHARGE_BYTES + 60_000);
    const done = stream();
    budget.open(as(done));
    data(budget, done, 50_000);
    done._readableState.ended = true;
    const partial = stream();
    budget.open(as(partial));
    data(budget, partial, 20_000);
    expect(reset).toEqual([]);
    expect(budget.heldBytes).toBe(STREAM_CHARGE_BYTES + 20_000);
  });

  it('resets the stream that overran it when nothing older gives room', () => {
    const { budget, reset, stream } = setup(STREAM_CHARGE_BYTES + 1000);
    const only = stream();
    budget.open(as(only));
    data(budget, only, 2000);
    expect(reset).toEqual([only]);
    expect(budget.heldBytes).toBe(0);
  });

  it('drops every request still arriving on a connection, and only those', () => {
    const { budget, reset, stream } = setup(1_000_000);
    const conn = {};
    const mine = [stream(conn), stream(conn)];
    const arrived = stream(conn);
    const other = stream();
    for (const s of [...mine, arrived, other]) budget.open(as(s));
    arrived._readableState.ended = true;
    budget.dropSession(conn as Http2Session);
    expect(reset).toEqual(mine);
    expect(budget.heldBytes).toBe(STREAM_CHARGE_BYTES);
  });
});
