import type { RateLimiter } from '../../core/limiter.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import type { RateLimitEvents } from '../observability/events.js';
import type { DecisionObserver } from '../observability/observer.js';
import type { DecisionTracing } from '../observability/tracing.js';
import type { RequestEnds } from '../end/request-end.js';
import type { EntryResolver } from './entry-resolver.js';
import type { OutcomeShaper } from './outcome-shaper.js';
import type { Insurance } from './stages/insurance.js';

/**
 * What the stages of every plan share, one per module, built once at bootstrap: the
 * module's limiter (over its store), options and events, and the services several stages
 * call. A stage reads what it needs from here when its plan is compiled.
 */
export interface StageServices {
  readonly limiter: RateLimiter;
  readonly options: RateLimitModuleOptions;
  /** The module's one events object: every log line and its throttle. */
  readonly events: RateLimitEvents;
  /** Rules to store entries (the entries and shadow stages). */
  readonly entries: EntryResolver;
  /** Decisions to outcomes: headers and refusals. */
  readonly shape: OutcomeShaper;
  /** Refunds and slot releases when a request ends. */
  readonly ends: RequestEnds;
  /** Insurance limits of `onStoreFailure: 'local'` policies. */
  readonly insurance: Insurance;
  /** Set only when `onDecision` or `metrics` is. */
  readonly observer: DecisionObserver | undefined;
  /** Set when `@opentelemetry/api` is loaded (see the `tracing` option). */
  readonly tracing: DecisionTracing | undefined;
}
