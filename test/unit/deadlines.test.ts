/**
 * The deadline queue behind store-call timeouts (issue 14): one timer for all calls of one
 * `timeoutMs`, as exact as a timer per call. Jest's fake timers are the injected clock
 * (they drive `setTimeout` and `performance.now` alike).
 */
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { deadlineIn, finished, heldDeadlines } from '../../lib/core/call/deadlines.js';

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

describe('deadlineIn', () => {
  it('expires each open call exactly timeoutMs after it started, in order; finished ones never', () => {
    const expired: string[] = [];
    const a = deadlineIn(100, () => expired.push('a'));
    jest.advanceTimersByTime(30);
    const b = deadlineIn(100, () => expired.push('b'));
    jest.advanceTimersByTime(30);
    deadlineIn(100, () => expired.push('c'));
    b.done = true; // answered in time
    jest.advanceTimersByTime(39);
    expect(expired).toEqual([]);
    jest.advanceTimersByTime(1); // t=100: a's deadline
    expect(expired).toEqual(['a']);
    expect(a.done).toBe(true);
    jest.advanceTimersByTime(30); // t=130: b's, but b finished
    expect(expired).toEqual(['a']);
    jest.advanceTimersByTime(29);
    expect(expired).toEqual(['a']);
    jest.advanceTimersByTime(1); // t=160: c's
    expect(expired).toEqual(['a', 'c']);
  });

  it('keeps calls of different timeouts apart', () => {
    const expired: string[] = [];
    deadlineIn(250, () => expired.push('slow'));
    deadlineIn(50, () => expired.push('fast'));
    jest.advanceTimersByTime(50);
    expect(expired).toEqual(['fast']);
    jest.advanceTimersByTime(199);
    expect(expired).toEqual(['fast']);
    jest.advanceTimersByTime(1);
    expect(expired).toEqual(['fast', 'slow']);
  });

  it('drops thousands of finished calls without expiring them, and still expires the last open one on time', () => {
    let expired = 0;
    const deadlines = Array.from({ length: 5000 }, () => deadlineIn(70, () => expired++));
    deadlines.slice(0, 4999).forEach((d) => (d.done = true));
    jest.advanceTimersByTime(69);
    expect(expired).toBe(0);
    jest.advanceTimersByTime(1);
    expect(expired).toBe(1);
    // The queue is empty again: a new call gets its own full timeout.
    deadlineIn(70, () => expired++);
    jest.advanceTimersByTime(69);
    expect(expired).toBe(1);
    jest.advanceTimersByTime(1);
    expect(expired).toBe(2);
  });

  // Regression (issue 14): every call's deadline, and through its `expire` closure the call's
  // promise and request, stayed queued for the whole timeoutMs after it was answered. At
  // 100k calls/s and the default 100 ms that is 10,000 live calls, which the garbage
  // collector copied and promoted: a memory-store decision took 7.5 µs of CPU instead of 2.4.
  it('holds about the calls in flight: answered ones at the head are dropped by the next call, and let go of their closure at once', () => {
    let expired = 0;
    const expire = () => expired++;
    const answered = Array.from({ length: 5000 }, () => deadlineIn(90, expire));
    expect(heldDeadlines(90)).toBe(5000);
    answered.forEach((d) => finished(d));
    expect(answered.every((d) => d.done && d.expire !== expire)).toBe(true);
    const open = deadlineIn(90, expire);
    expect(heldDeadlines(90)).toBe(1);
    // Out of order: an answered call behind an open one waits for the head to go.
    const behind = deadlineIn(90, expire);
    finished(behind);
    deadlineIn(90, expire);
    expect(heldDeadlines(90)).toBe(3);
    finished(open);
    deadlineIn(90, expire);
    expect(heldDeadlines(90)).toBe(2);
    jest.advanceTimersByTime(90);
    expect(expired).toBe(2);
    expect(heldDeadlines(90)).toBe(0);
  });
});
