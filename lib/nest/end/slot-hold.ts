import type { ExecutionContext } from '@nestjs/common';
import type { Transport } from '../transports/transport.js';

/**
 * The concurrency slots one call holds, from the guard's decision to the end of its handler.
 * A slot bounds the work of a handler, so it is held while the handler runs whatever the
 * client does (an abort, a reset HTTP/2 stream), and given back
 * before the response is written: `RateLimitSettleInterceptor` claims the hold when the
 * handler starts and passes its result on only once the release has reached the store.
 *
 * States: `pending` (admitted, handler not started), `running` (claimed), `streaming` (the
 * handler returned a body that is sent after it: held until the response ends), `ended`.
 * The transport's end of the call (HTTP: the response closed) gives back a `streaming` hold,
 * and a `pending` one when no handler will run any more: its response was sent (a later
 * guard or an interceptor refused it), or its client left before its body arrived (a slot
 * taken before the body, `includeUpload`). A `pending` hold whose client merely left is
 * kept: its handler may still run, and will give it back.
 */
export class SlotHold {
  private readonly releases: (() => Promise<void>)[] = [];
  private state: 'pending' | 'running' | 'streaming' | 'ended' = 'pending';
  private ended: Promise<void> | undefined;
  /** The transport's end of the call came while the handler ran (a response it wrote itself). */
  private callOver = false;

  /** Adds the slots of one decision (a call decided in two steps holds those of both). */
  add(release: () => Promise<void>): void {
    if (this.state === 'ended') void release();
    else this.releases.push(release);
  }

  /** The handler starts: true for the first to claim a pending hold. */
  claim(): boolean {
    if (this.state !== 'pending') return false;
    this.state = 'running';
    return true;
  }

  /**
   * Gives every slot back, once; resolves when the store has answered or failed for good
   * (within the limiter's `timeoutMs`: a failed release is kept and retried). Never rejects.
   */
  end(): Promise<void> {
    if (this.ended === undefined) {
      this.state = 'ended';
      const releases = this.releases.splice(0);
      this.ended =
        releases.length === 1 ? releases[0]!() : Promise.all(releases.map((r) => r())).then(noop);
    }
    return this.ended;
  }

  /**
   * The handler returned a streamed body, or wrote the response itself (`@Res()`): the slots
   * are held until the response ends, at once when it already has (a handler that wrote it
   * and then went on working).
   */
  handOver(): void {
    if (this.state !== 'running') return;
    if (this.callOver) void this.end();
    else this.state = 'streaming';
  }

  /** The transport's end of the call: `over` when no handler will run for it any more. */
  callEnded(over: boolean): void {
    if (this.state === 'streaming' || (this.state === 'pending' && over)) void this.end();
    // The client left before or while the handler ran: a response handed over later will
    // never end, so it gives the slots back as the handler returns.
    else if (this.state === 'running' || this.state === 'pending') this.callOver = true;
  }
}

// A registered symbol: a call guarded by a CommonJS and an ESM copy of the package holds one.
const HOLD = Symbol.for('nest-rate-limit:slot-hold');

type Carrier = { [HOLD]?: SlotHold };

/**
 * Puts the slots `release` gives back in the hold of the call's carrier, made on the first
 * decision that took some, with the transport's end of the call watched once.
 */
export function holdSlots(
  ctx: ExecutionContext,
  transport: Transport,
  carrier: object,
  release: () => Promise<void>,
): void {
  let hold = (carrier as Carrier)[HOLD];
  if (hold === undefined) {
    const made = ((carrier as Carrier)[HOLD] = hold = new SlotHold());
    transport.onDone?.(ctx, (over) => made.callEnded(over));
  }
  hold.add(release);
}

/** The hold of the call on `carrier` when this caller is the first to claim it, else undefined. */
export function claimSlots(carrier: object): SlotHold | undefined {
  const hold = (carrier as Carrier)[HOLD];
  return hold?.claim() ? hold : undefined;
}

/** Ends the hold of the call on `carrier`, if any (a refusal: no handler will run). */
export function endSlots(carrier: object): Promise<void> {
  return (carrier as Carrier)[HOLD]?.end() ?? DONE;
}

/** Ends the hold of the call on `carrier`, if any, and removes it: the call is decided afresh. */
export function forgetSlots(carrier: object): Promise<void> {
  const ended = endSlots(carrier);
  delete (carrier as Carrier)[HOLD];
  return ended;
}

const DONE = Promise.resolve();

function noop(): void {}
