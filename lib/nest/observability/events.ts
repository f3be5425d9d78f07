import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { errorsLink } from '../../core/errors-page.js';
import { RateLimitBackendError } from '../../core/errors.js';
import { formatRate } from '../../core/model/rate.js';

/**
 * An identity as it appears in logs and decision events: 12 characters of base64url
 * SHA-256. Identities may be API keys or personal data; the hash still tells clients apart.
 */
export function hashIdentity(identity: string): string {
  // The same clients come back request after request: remembered, a hash costs a lookup
  // instead of a SHA-256 (about 2 µs) on every observed request.
  let hash = hashes.get(identity);
  if (hash !== undefined) return hash;
  hash = createHash('sha256').update(identity).digest('base64url').slice(0, 12);
  if (identity.length > MAX_HASHED_LENGTH) return hash;
  if (hashes.size >= MAX_HASHES) hashes.delete(hashes.keys().next().value!);
  hashes.set(identity, hash);
  return hash;
}

/**
 * Hashes remembered, oldest first out: at most 4,096 identities of at most 128 characters
 * (about 1 MB at worst), so client-chosen identities cannot grow it further.
 */
const hashes = new Map<string, string>();
const MAX_HASHES = 4096;
const MAX_HASHED_LENGTH = 128;

/**
 * The stable names of the log events, each written as one line: the name, a space, then
 * a JSON object of fields. Each has a heading in `docs/reference/errors.md` (its fields,
 * what it means, what to do); the lines that call for action (`backend_error`, `insurance`,
 * `config_error`, `redis_unreachable`, `unenforced`, `shedding_started`) end with a `docs`
 * field naming it.
 */
export const RATE_LIMIT_EVENTS = {
  /** A request refused with 429; throttled per (route, identity). */
  blocked: 'rate_limit.blocked',
  /** A shadow policy would have refused a request; throttled per (route, identity), like `blocked`. */
  shadowBlocked: 'rate_limit.shadow_blocked',
  /** The store failed or timed out; throttled per error kind. */
  backendError: 'rate_limit.backend_error',
  /** Insurance limits (`onStoreFailure: 'local'`) decided a request in memory; throttled per route. */
  insurance: 'rate_limit.insurance',
  /** A user function (key, rate, cost, skip, errorMessage, onDecision) failed; throttled per place. */
  configError: 'rate_limit.config_error',
  /** An operator's override of a limit took effect for a request (info level). */
  overrideApplied: 'rate_limit.override_applied',
  /** The Redis client the module created lost its connection; once per outage. */
  redisUnreachable: 'rate_limit.redis_unreachable',
  /**
   * At bootstrap, once per handler: a `@RateLimit` that will never be enforced as written (a
   * method Nest does not guard, a context no adapter limits, an RPC handler whose callers
   * would all share one budget).
   */
  unenforced: 'rate_limit.unenforced',
  /** At bootstrap, once: overload protection is on, with the settings it runs with. */
  overloadEnabled: 'rate_limit.overload_enabled',
  /** Overload protection shed a call after a quiet spell: once per episode. */
  sheddingStarted: 'rate_limit.shedding_started',
  /** Overload protection shed nothing for 2 s: the episode is over, with its counts. */
  sheddingStopped: 'rate_limit.shedding_stopped',
} as const;

/** One of {@link RATE_LIMIT_EVENTS}. */
export type RateLimitEventName = (typeof RATE_LIMIT_EVENTS)[keyof typeof RATE_LIMIT_EVENTS];

/** Fields of a `rate_limit.blocked` line (besides `count`). */
export interface BlockedDetail {
  /** `Controller.handler`. */
  route: string;
  /** The identity, hashed (12 characters of base64url SHA-256). */
  identity: string;
  /** Names of the policies that refused. */
  policies: string[];
  /** Units the request asked for. */
  cost: number;
  /** Longest wait among the refusing policies, in **ms**; `null` when it can never be admitted. */
  retryAfterMs: number | null;
}

/** Fields of a `rate_limit.override_applied` line. */
export interface OverrideAppliedDetail {
  /** `Controller.handler`. */
  route: string;
  /** The identity as limited; the logged line carries it hashed, like every other event. */
  identity: string;
  /** The policy whose limit was overridden. */
  policy: string;
  /** The override's rate, logged as written (`"100/m"`). */
  limit: number;
  /** The override's period, in **ms**. */
  periodMs: number;
}

/** Fields of a `rate_limit.unenforced` line. */
export interface UnenforcedDetail {
  /** `Class.method`, or `Class` for a class-level `@RateLimit` on a class with no handler. */
  route: string;
  /** Why it is not enforced as written, and what to do. */
  reason: string;
}

function isBackendError(error: unknown): error is RateLimitBackendError {
  return error instanceof RateLimitBackendError;
}

/**
 * An identity as the throttle remembers it: as it is up to 64 characters, else its hash, so
 * the 10,000 remembered pairs are bounded in bytes too, whatever a key function returns
 * (unbounded, 3,000 identities of 90 KB took the heap from 18 to 291 MB).
 */
function throttleKey(identity: string): string {
  return identity.length <= 64 ? identity : `#${hashIdentity(identity)}`;
}

/** The message of anything thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Throttled keys remembered (config errors by place, overrides by route and identity). */
const MAX_THROTTLED_KEYS = 10_000;

/** (route, identity) pairs whose `rate_limit.blocked` lines are throttled individually. */
const MAX_BLOCKED_PAIRS = 10_000;

interface Seen {
  at: number;
  held: number;
}

/**
 * Log events with stable names (see {@link RATE_LIMIT_EVENTS}). Noisy kinds are logged at
 * most once per interval, with the count of what was held back, so an outage writes one
 * line per 10 s, not one per request.
 */
export class RateLimitEvents {
  private readonly last = new Map<string, Seen>();
  /** Per route and raw identity, in the order of their last line (oldest first). */
  private readonly blockedPairs = new Map<string, Seen>();

  /**
   * @param intervalMs shortest time, in **ms**, between two lines of one throttled kind
   * @param clock current time in **ms**
   */
  constructor(
    private readonly logger: Logger = new Logger('RateLimit'),
    private readonly intervalMs = 10_000,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Logs `event` for `kind` unless it was logged less than `intervalMs` ago. */
  throttled(event: string, kind: string, detail: Record<string, unknown>): void {
    const now = this.clock();
    const key = `${event}:${kind}`;
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return;
    }
    this.mark(key, now);
    const fields = { kind, count: 1 + (seen?.held ?? 0), ...detail, docs: errorsLink(event) };
    this.logger.warn(`${event} ${JSON.stringify(fields)}`);
  }

  /**
   * Logs `rate_limit.backend_error` (throttled per error kind): a store call failed or timed
   * out for `route`; `detail` adds fields (`shadow: true` for a shadow policy's call).
   */
  backendError(route: string, error: unknown, detail?: Record<string, unknown>): void {
    const kind = isBackendError(error) ? error.kind : 'error';
    this.throttled(RATE_LIMIT_EVENTS.backendError, kind, {
      route,
      ...detail,
      message: messageOf(error),
    });
  }

  /** Logs `rate_limit.config_error`: a user function failed at request time, in `where`. */
  configError(where: string, error: unknown): void {
    this.throttled(RATE_LIMIT_EVENTS.configError, where, {
      route: where,
      message: messageOf(error),
    });
  }

  /**
   * Logs `rate_limit.blocked` at most once per `intervalMs` per (route, identity), with
   * `count`: the refusals of that pair since its previous line, this one included. While
   * more than 10,000 pairs are refused within one interval, the pairs beyond that share
   * one line per route per interval (its identity `"*"`). So a flood writes at most
   * 10,000 + (routes) lines per interval, and one client hammering one route one line.
   *
   * @param rawIdentity the identity as limited, used only to throttle; never logged
   * @param detail what to log; `detail()` runs only when a line is written (hashing costs)
   */
  blocked(route: string, rawIdentity: string, detail: () => BlockedDetail): void {
    this.perPair(RATE_LIMIT_EVENTS.blocked, route, rawIdentity, detail);
  }

  /**
   * Logs `rate_limit.shadow_blocked`, throttled exactly as {@link RateLimitEvents.blocked}:
   * a shadow rollout over real traffic would otherwise write one line per would-be refusal.
   */
  shadowBlocked(route: string, rawIdentity: string, detail: () => { identity: string }): void {
    this.perPair(RATE_LIMIT_EVENTS.shadowBlocked, route, rawIdentity, detail);
  }

  private perPair(
    event: string,
    route: string,
    rawIdentity: string,
    detail: () => { identity: string },
  ): void {
    const now = this.clock();
    let key = `${event}\u0000${route}\u0000${throttleKey(rawIdentity)}`;
    let seen = this.blockedPairs.get(key);
    let overflow = false;
    if (seen === undefined && this.blockedPairs.size >= MAX_BLOCKED_PAIRS) {
      // Forget the pair logged longest ago if its interval is over; else fold this one
      // into the route's shared line.
      const [oldestKey, oldest] = this.blockedPairs.entries().next().value!;
      if (now - oldest.at >= this.intervalMs) this.blockedPairs.delete(oldestKey);
      else {
        overflow = true;
        key = `${event}\u0000${route}\u0000*`;
        seen = this.last.get(key);
      }
    }
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return;
    }
    const entry = { at: now, held: 0 };
    if (overflow) this.last.set(key, entry);
    else {
      // Delete first, so the map stays ordered by last line.
      this.blockedPairs.delete(key);
      this.blockedPairs.set(key, entry);
    }
    const fields = detail();
    if (overflow) fields.identity = '*';
    this.logger.warn(`${event} ${JSON.stringify({ ...fields, count: 1 + (seen?.held ?? 0) })}`);
  }

  /**
   * Logs `rate_limit.override_applied`: an operator's override replaced a policy's limit for
   * a request. At most once per 10 s per (route, identity, policy): an override usually
   * serves a busy client.
   */
  overrideApplied(detail: OverrideAppliedDetail): void {
    // Throttled on the raw identity; hashed only for a line that is written.
    const key = `${RATE_LIMIT_EVENTS.overrideApplied}:${detail.route} ${throttleKey(detail.identity)} ${detail.policy}`;
    const now = this.clock();
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return;
    }
    this.mark(key, now);
    const { limit, periodMs, ...rest } = detail;
    const line = {
      count: 1 + (seen?.held ?? 0),
      ...rest,
      identity: hashIdentity(detail.identity),
      rate: formatRate({ limit, periodMs }),
    };
    // Info, not a warning: an operator asked for it, and nothing is wrong.
    this.logger.log(`${RATE_LIMIT_EVENTS.overrideApplied} ${JSON.stringify(line)}`);
  }

  /** Logs `rate_limit.unenforced`, unthrottled: bootstrap writes one line per handler. */
  unenforced(detail: UnenforcedDetail): void {
    const fields = { ...detail, docs: errorsLink(RATE_LIMIT_EVENTS.unenforced) };
    this.logger.warn(`${RATE_LIMIT_EVENTS.unenforced} ${JSON.stringify(fields)}`);
  }

  /**
   * Logs `rate_limit.shedding_started` (a warning, with the `docs` field) or
   * `rate_limit.shedding_stopped` (info), unthrottled: overload protection writes one of
   * each per episode, never one per call.
   */
  shedding(started: boolean, detail: Record<string, unknown>): void {
    if (started) {
      const event = RATE_LIMIT_EVENTS.sheddingStarted;
      this.logger.warn(`${event} ${JSON.stringify({ ...detail, docs: errorsLink(event) })}`);
    } else {
      this.logger.log(`${RATE_LIMIT_EVENTS.sheddingStopped} ${JSON.stringify(detail)}`);
    }
  }

  /** Logs `rate_limit.overload_enabled` (info): at bootstrap, once, when the option is on. */
  overloadEnabled(detail: Record<string, unknown>): void {
    this.logger.log(`${RATE_LIMIT_EVENTS.overloadEnabled} ${JSON.stringify(detail)}`);
  }

  /** Notes when `key` was last logged; the oldest go first beyond 10,000 keys. */
  private mark(key: string, now: number): void {
    this.last.delete(key);
    this.last.set(key, { at: now, held: 0 });
    if (this.last.size > MAX_THROTTLED_KEYS) this.last.delete(this.last.keys().next().value!);
  }
}
