/** A call waiting for its store's answer, until `at` (`performance.now()` ms). */
export interface Deadline {
  readonly at: number;
  /** Set once the call has an outcome: the queue then drops it without a word. */
  done: boolean;
  /**
   * Called once `at` has passed and the call is still not `done`, with how late the timer
   * fired, in **ms**: how long this process kept it from running (a busy event loop, a
   * garbage collection), during which no reply could be read either.
   */
  expire: (lateMs: number) => void;
}

const NOTHING = (): void => {};

/**
 * Marks the call answered. Also lets go of `expire`, and with it of everything the call's
 * closure holds (its promise, its request), at once rather than when the deadline reaches
 * the head of its queue.
 */
export function finished(deadline: Deadline): void {
  deadline.done = true;
  deadline.expire = NOTHING;
}

/**
 * The deadlines of store calls that share one `timeoutMs`, with one timer for all of
 * them instead of a timer per call (a `setTimeout` and its `clearTimeout` cost more than
 * the rest of a memory-store decision). Calls are added in the order they start and all
 * wait equally long, so deadlines come in order: the timer only ever waits for the oldest
 * call still open, and calls that finished in time are dropped when they reach the head.
 * Expiry is as exact as a timer of its own would be.
 */
class DeadlineQueue {
  private readonly queue: Deadline[] = [];
  private head = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the timer should fire (`performance.now()` ms). */
  private dueAt = 0;

  constructor(private readonly timeoutMs: number) {}

  /** Deadlines held, finished or not (for tests). */
  get size(): number {
    return this.queue.length - this.head;
  }

  add(expire: (lateMs: number) => void): Deadline {
    const deadline: Deadline = { at: performance.now() + this.timeoutMs, done: false, expire };
    const queue = this.queue;
    // Calls mostly finish in the order they started: the answered ones at the head go now,
    // so the queue holds about the calls in flight, not every call of the last timeoutMs
    // (tens of thousands at a high rate, which would outlive the young generation and make
    // the garbage collector copy and promote them). Behind a call still open, answered ones
    // wait until it ends or expires (at most timeoutMs of calls), but `finished` has already
    // let go of what they held: each is then a small object.
    while (this.head < queue.length && queue[this.head]!.done) this.head++;
    if (this.head === queue.length) {
      queue.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > queue.length) {
      queue.splice(0, this.head);
      this.head = 0;
    }
    queue.push(deadline);
    this.timer ??= this.arm(this.timeoutMs);
    return deadline;
  }

  private arm(ms: number): ReturnType<typeof setTimeout> {
    this.dueAt = performance.now() + Math.max(1, Math.ceil(ms));
    const timer = setTimeout(() => this.due(), Math.max(1, Math.ceil(ms)));
    // The calls themselves (sockets, promises) keep the process alive, not their deadlines.
    timer.unref();
    return timer;
  }

  private due(): void {
    this.timer = undefined;
    const now = performance.now();
    // Every deadline it expires waited through the same stall: each is told its length.
    const lateMs = Math.max(0, now - this.dueAt);
    const queue = this.queue;
    while (this.head < queue.length) {
      const next = queue[this.head]!;
      if (!next.done && next.at > now) break;
      this.head++;
      if (!next.done) {
        next.done = true;
        next.expire(lateMs);
      }
    }
    if (this.head === queue.length) {
      queue.length = 0;
      this.head = 0;
      return;
    }
    // Drop the finished prefix now and then, so the array does not grow without end.
    if (this.head > 1024 && this.head * 2 > queue.length) {
      queue.splice(0, this.head);
      this.head = 0;
    }
    this.timer = this.arm(queue[this.head]!.at - now);
  }
}

const queues = new Map<number, DeadlineQueue>();

/**
 * Registers a call that times out `timeoutMs` from now (finite, > 0): `expire` runs then,
 * unless the returned deadline was marked `done` first.
 */
export function deadlineIn(timeoutMs: number, expire: (lateMs: number) => void): Deadline {
  let queue = queues.get(timeoutMs);
  if (queue === undefined) queues.set(timeoutMs, (queue = new DeadlineQueue(timeoutMs)));
  return queue.add(expire);
}

/** How many deadlines of `timeoutMs` the queue still holds, answered or not (for tests). */
export function heldDeadlines(timeoutMs: number): number {
  return queues.get(timeoutMs)?.size ?? 0;
}
