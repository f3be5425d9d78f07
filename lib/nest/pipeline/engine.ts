import type { RateLimiter } from '../../core/limiter.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import type { RateLimitEvents } from '../observability/events.js';
import type { DecisionObserver } from '../observability/observer.js';
import type { DecisionTracing } from '../observability/tracing.js';
import type { PolicyResolver } from './stages/entries.js';
import type { Insurance } from './stages/insurance.js';
import type { RequestEnds } from '../end/request-end.js';
import type { Outcomes } from './stages/shape.js';

/** What the stages share, one per module: built once, at bootstrap. */
export interface Engine {
  readonly limiter: RateLimiter;
  readonly options: RateLimitModuleOptions;
  /** The module's one events object: every log line and its throttle. */
  readonly events: RateLimitEvents;
  /** The entries stage: rules to store entries. */
  readonly entries: PolicyResolver;
  /** The shape stage: headers and refusals. */
  readonly shape: Outcomes;
  /** Refunds and slot releases when a request ends. */
  readonly ends: RequestEnds;
  /** Insurance limits of `onStoreFailure: 'local'` policies. */
  readonly insurance: Insurance;
  /** Set only when `onDecision` or `metrics` is. */
  readonly observer: DecisionObserver | undefined;
  /** Set when `@opentelemetry/api` is loaded (see the `tracing` option). */
  readonly tracing: DecisionTracing | undefined;
}
