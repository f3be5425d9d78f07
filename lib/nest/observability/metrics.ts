import { quote, RateLimitConfigError, type BackendErrorKind } from '../../core/errors.js';
import type { CircuitState } from '../../core/call/circuit-breaker.js';

/**
 * Where the metrics are registered: a prom-client `Registry` (typed by shape, so this
 * package's types do not require prom-client to be installed).
 */
export interface MetricsRegistry {
  getSingleMetric(name: string): unknown;
  removeSingleMetric(name: string): void;
  registerMetric(metric: never): void;
}

/** The `metrics` module option in its object form. */
export interface MetricsOptions {
  /** Registry to register the metrics in. Default: prom-client's global `register`. */
  registry?: MetricsRegistry;
  /** First part of every metric name. Default `'rate_limit_'`. */
  prefix?: string;
}

/** What a decision counts as, per policy, in `rate_limit_decisions_total`. */
export type MetricOutcome = 'allowed' | 'blocked' | 'shadow_blocked';

/** Loads prom-client; replaced in tests to simulate it missing. */
export type PromClientLoader = () => Promise<unknown>;

/** The parts of prom-client used here. */
export interface PromClient {
  register: MetricsRegistry;
  Counter: new (config: object) => { inc(labels: Record<string, string>, value?: number): void };
  Gauge: new (config: object) => { set(value: number): void };
  Histogram: new (config: object) => { observe(value: number): void };
}

const WHERE = 'RateLimitModule options';
const METRIC_PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** Every `kind` of `rate_limit_backend_errors_total`, exported at 0 from the start. */
const BACKEND_ERROR_KINDS: readonly BackendErrorKind[] = ['timeout', 'unavailable', 'error'];

/** Store call durations, in **seconds**: 0.1 ms to 100 ms. */
const STORE_DURATION_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];

/**
 * Checks the `metrics` option.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION`
 */
export function validateMetricsOption(metrics: unknown): void {
  if (metrics === undefined || typeof metrics === 'boolean') return;
  const fail = (what: string) => {
    throw new RateLimitConfigError('ERR_RATE_LIMIT_OPTION', `invalid metrics${what}`, WHERE);
  };
  if (typeof metrics !== 'object' || metrics === null) {
    fail(` ${quote(metrics)}: expected a boolean or { registry?, prefix? }`);
  }
  const { registry, prefix } = metrics as MetricsOptions;
  if (
    registry !== undefined &&
    (typeof registry !== 'object' ||
      registry === null ||
      typeof registry.registerMetric !== 'function' ||
      typeof registry.getSingleMetric !== 'function')
  ) {
    fail('.registry: expected a prom-client Registry');
  }
  if (prefix !== undefined && (typeof prefix !== 'string' || !METRIC_PREFIX.test(prefix))) {
    fail(`.prefix ${quote(prefix)}: expected a metric name prefix matching ${METRIC_PREFIX}`);
  }
}

/**
 * Loads prom-client and registers the metrics, when the `metrics` option asks for them.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_PEER_DEPENDENCY` when prom-client cannot be
 *   loaded, or a metric of the same name is already registered
 */
export async function createMetrics(
  metrics: boolean | MetricsOptions | undefined,
  // webpackIgnore: bundlers must not require prom-client at build time; it is optional.
  load: PromClientLoader = () => import(/* webpackIgnore: true */ 'prom-client'),
): Promise<RateLimitMetrics | undefined> {
  if (metrics === undefined || metrics === false) return undefined;
  let prom: PromClient;
  try {
    const loaded = (await load()) as PromClient & { default?: PromClient };
    prom = typeof loaded.Counter === 'function' ? loaded : loaded.default!;
  } catch (error) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_PEER_DEPENDENCY',
      `metrics needs the optional peer dependency prom-client: install it (npm install prom-client) or remove the metrics option (${error instanceof Error ? error.message : String(error)})`,
      WHERE,
    );
  }
  const options = metrics === true ? {} : metrics;
  return new RateLimitMetrics(prom, options.registry ?? prom.register, options.prefix);
}

/**
 * The Prometheus metrics of one module. Labels are scopes, policy names, outcomes and error
 * kinds only: each comes from code (decorators) or the module options, so their set is
 * finite. Never identities or request paths, whose values are unbounded.
 */
/**
 * Throws when one of `names` is registered already: a second module on the same registry
 * would otherwise share (and double count) the first one's metrics.
 * @throws RateLimitConfigError `ERR_RATE_LIMIT_OPTION`
 */
export function checkUnregistered(registry: MetricsRegistry, names: readonly string[]): void {
  for (const name of names) {
    if (registry.getSingleMetric(name) !== undefined) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        `metric ${name} is already registered: give each RateLimitModule its own metrics registry or prefix`,
        WHERE,
      );
    }
  }
}

export class RateLimitMetrics {
  private readonly decisions: { inc(labels: Record<string, string>): void };
  private readonly backendErrors: { inc(labels: Record<string, string>, value?: number): void };
  private readonly nearLimit: { inc(labels: Record<string, string>): void };
  private readonly storeDuration: { observe(value: number): void };
  private readonly registered: { name: string; metric: unknown }[] = [];
  private circuit: () => CircuitState = () => 'closed';
  private insured: () => boolean = () => false;
  private instances: () => number | undefined = () => undefined;

  /** @throws {RateLimitConfigError} when a metric of the same name is already registered */
  constructor(
    prom: PromClient,
    private readonly registry: MetricsRegistry,
    prefix = 'rate_limit_',
  ) {
    const names = {
      decisions: `${prefix}decisions_total`,
      backendErrors: `${prefix}backend_errors_total`,
      storeDuration: `${prefix}store_duration_seconds`,
      circuitOpen: `${prefix}circuit_open`,
      nearLimit: `${prefix}near_limit_total`,
      insurance: `${prefix}insurance_in_force`,
      instances: `${prefix}instances`,
    };
    checkUnregistered(registry, Object.values(names));
    const registers = [registry];
    const track = <T>(name: string, metric: T): T => {
      this.registered.push({ name, metric });
      return metric;
    };
    this.decisions = track(
      names.decisions,
      new prom.Counter({
        name: names.decisions,
        help: 'Rate-limit decisions per scope and policy: allowed, blocked, or shadow_blocked (a shadow policy would have refused).',
        labelNames: ['scope', 'policy', 'outcome'],
        registers,
      }),
    );
    this.backendErrors = track(
      names.backendErrors,
      new prom.Counter({
        name: names.backendErrors,
        help: 'Rate-limit store calls that failed, by kind: timeout, unavailable (circuit open included), error.',
        labelNames: ['kind'],
        registers,
      }),
    );
    // A series that appears only at its first error hides that error from rate() and
    // increase(), and an alert on them never fires for it: each kind starts at 0.
    for (const kind of BACKEND_ERROR_KINDS) this.backendErrors.inc({ kind }, 0);
    this.storeDuration = track(
      names.storeDuration,
      new prom.Histogram({
        name: names.storeDuration,
        help: 'Duration of rate-limit store calls that answered, in seconds.',
        buckets: STORE_DURATION_BUCKETS,
        registers,
      }),
    );
    const circuit = () => this.circuit();
    track(
      names.circuitOpen,
      new prom.Gauge({
        name: names.circuitOpen,
        help: '1 while the circuit breaker skips the rate-limit store (open or half-open), else 0.',
        registers,
        collect(this: { set(value: number): void }) {
          this.set(circuit() === 'closed' ? 0 : 1);
        },
      }),
    );
    const insured = () => this.insured();
    track(
      names.insurance,
      new prom.Gauge({
        name: names.insurance,
        help: "1 while insurance limits (onStoreFailure: 'local') decide in this process's memory because the store fails, else 0.",
        registers,
        collect(this: { set(value: number): void }) {
          this.set(insured() ? 1 : 0);
        },
      }),
    );
    const instances = () => this.instances();
    track(
      names.instances,
      new prom.Gauge({
        name: names.instances,
        help: "Processes sharing the store that insurance limits (onStoreFailure: 'local') divide by: the instances option, or the count learned from the store; 0 while unknown.",
        registers,
        collect(this: { set(value: number): void }) {
          this.set(instances() ?? 0);
        },
      }),
    );
    this.nearLimit = track(
      names.nearLimit,
      new prom.Counter({
        name: names.nearLimit,
        help: 'Admitted requests that left less than 20% of a policy limit remaining, per scope and policy.',
        labelNames: ['scope', 'policy'],
        registers,
      }),
    );
  }

  /**
   * Reads, when the registry is scraped, whether insurance limits are in force and how many
   * processes they divide by (undefined: unknown).
   */
  watchInsurance(inForce: () => boolean, instances: () => number | undefined): void {
    this.insured = inForce;
    this.instances = instances;
  }

  /** Reads the circuit breaker's state when the registry is scraped. */
  watchCircuit(state: () => CircuitState): void {
    this.circuit = state;
  }

  /**
   * Counts one policy's verdict; `nearLimit` when it admitted with < 20 % of its limit left.
   * @param scope the policy's budget: `Controller.handler`, `global`, or the scope it names
   */
  decision(scope: string, policy: string, outcome: MetricOutcome, nearLimit: boolean): void {
    this.decisions.inc({ scope, policy, outcome });
    if (nearLimit) this.nearLimit.inc({ scope, policy });
  }

  /** Counts a failed store call. */
  backendError(kind: string): void {
    this.backendErrors.inc({ kind });
  }

  /** Records the duration, in **ms**, of a store call that answered. */
  storeCall(durationMs: number): void {
    this.storeDuration.observe(durationMs / 1000);
  }

  /** Unregisters the metrics this module registered (at shutdown). */
  remove(): void {
    for (const { name, metric } of this.registered.splice(0)) {
      if (this.registry.getSingleMetric(name) === metric) this.registry.removeSingleMetric(name);
    }
  }
}
