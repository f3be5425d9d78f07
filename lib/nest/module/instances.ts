import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Cluster, Redis } from 'ioredis';
import { announceInstance } from '../../core/stores/redis/instances.js';

/** Default of the module's `announceIntervalMs`: every 10 s. */
const DEFAULT_ANNOUNCE_INTERVAL_MS = 10_000;
/** An announcement lives this many intervals, so one lost or late announce drops no process. */
const LIVE_INTERVALS = 3;

/**
 * How many processes share the store, for insurance limits (`onStoreFailure: 'local'`): the
 * module's `instances` when given; else learned while the store is healthy. Each process adds
 * itself to a sorted set `<prefix>:instances` every `announceIntervalMs` (one script call on an
 * unref'd timer, never on the request path) and keeps the count of those that announced within
 * the last three intervals. A failed announce keeps the last count learned, which is the point:
 * the count must survive the outage it is used in.
 */
export class InstanceCount {
  private learned: number | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private announcing = false;
  private readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

  /**
   * @param given the module's `instances`, which wins
   * @param client the Redis client the module's store talks to; undefined for other stores
   *   (a custom store cannot be asked, so nothing is learned)
   * @param memory the store is this process's memory: it is the only instance
   * @param intervalMs `announceIntervalMs`, in **ms**
   */
  constructor(
    private readonly given: number | undefined,
    private readonly client: Redis | Cluster | undefined,
    private readonly memory: boolean,
    private readonly key: string,
    private readonly intervalMs = DEFAULT_ANNOUNCE_INTERVAL_MS,
  ) {}

  /**
   * The count insurance limits divide by: given, else learned, else 1 for the memory store;
   * undefined when it is not known (never learned), in which case the insurance share is the
   * smallest there is, 1 per period (see `Insurance`).
   */
  get value(): number | undefined {
    return this.given ?? this.learned ?? (this.memory ? 1 : undefined);
  }

  /** Starts announcing, once, when the count must be learned and can be. */
  start(): void {
    if (this.timer !== undefined || this.given !== undefined || this.client === undefined) return;
    this.announce();
    this.timer = setInterval(() => this.announce(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops announcing (at shutdown); this process drops out of the others' count by itself. */
  stop(): void {
    clearInterval(this.timer);
  }

  private announce(): void {
    const client = this.client!;
    // A slow store: one announce at a time. A closed client: nothing to say any more.
    if (this.announcing || client.status === 'end') return;
    this.announcing = true;
    announceInstance(client, this.key, this.id, this.intervalMs * LIVE_INTERVALS).then(
      (count) => {
        this.learned = count;
        this.announcing = false;
      },
      () => {
        this.announcing = false;
      },
    );
  }
}
