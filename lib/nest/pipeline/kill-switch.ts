import { isThenable } from './thenable.js';

/** Longest wait for an async `enabled` function, in ms. */
const ENABLED_WAIT_MS = 100;

/**
 * The kill switch (`enabled`) as a function: asked before anything else, without Redis.
 * An async answer is awaited 100 ms at most, and never twice at once: while one is
 * pending, calls take the last answer at once, so a stalled flag service neither stalls
 * requests nor piles up calls. A function that throws or rejects counts as on.
 */
export class KillSwitch {
  /** The last answer, for when an answer is slow to come. */
  private last = true;
  /** The call still awaited, if any: one at a time. */
  private asking: Promise<boolean> | undefined;

  /** @param failed logs an `enabled` that threw or rejected (`rate_limit.config_error`) */
  constructor(private readonly failed: (error: unknown) => void) {}

  /** Whether limits apply now, per `enabled`. */
  async on(enabled: () => boolean | Promise<boolean>): Promise<boolean> {
    if (this.asking) return this.last;
    const failed = (error: unknown) => {
      this.failed(error);
      return (this.last = true);
    };
    let answer: boolean | Promise<boolean>;
    try {
      answer = enabled();
    } catch (error) {
      return failed(error);
    }
    if (!isThenable(answer)) return (this.last = answer !== false);
    const asking = Promise.resolve(answer)
      .then((on) => (this.last = on !== false), failed)
      .finally(() => (this.asking = undefined));
    this.asking = asking;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(this.last), ENABLED_WAIT_MS);
    });
    return Promise.race([asking, late]).finally(() => clearTimeout(timer));
  }
}
