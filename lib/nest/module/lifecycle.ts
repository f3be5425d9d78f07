import { Inject, type OnApplicationShutdown } from '@nestjs/common';
import type { Resources } from './resources.js';

/** The token of what the module opened (see `createResources`). */
export const RESOURCES = Symbol('RATE_LIMIT_RESOURCES');

/** Closes what the module created, and only that. */
export class Shutdown implements OnApplicationShutdown {
  constructor(@Inject(RESOURCES) private readonly resources: Resources) {}

  onApplicationShutdown(): Promise<void> {
    return release(this.resources);
  }
}

/** Each release, so a second (a failed start, then `app.close()`) waits on the first. */
const releases = new WeakMap<Resources, Promise<void>>();

/** Closes what the module created, once however often it is asked. */
export function release(resources: Resources): Promise<void> {
  let done = releases.get(resources);
  if (done === undefined) releases.set(resources, (done = releaseOnce(resources)));
  return done;
}

async function releaseOnce({
  client,
  ownsClient,
  store,
  ownsStore,
  metrics,
}: Resources): Promise<void> {
  // Unregistered, so the next app in this process (tests, hot reload) can register them again.
  metrics?.remove();
  // The store first: its timer (the index of controlled identities) must not call a client
  // being closed.
  if (ownsStore) await store.close?.();
  // QUIT needs a live connection; without one, disconnect at once rather than wait on it.
  // Not once ended (a failed start releases, then app.close() again): ioredis would arm a
  // 2 s timer to destroy a socket already gone, keeping the process alive that long.
  if (ownsClient && client) {
    if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
    else if (client.status !== 'end') client.disconnect();
  }
}
