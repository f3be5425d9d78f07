/**
 * Apps started with Nest's `instrument` option (`NestFactory.create(AppModule, { instrument })`,
 * which `@nestjs/observe` uses and the apps `nest new` makes now have): Nest wraps every provider,
 * and the module's APP_GUARD alias once more, in a Proxy. The module's guard must still decide
 * every request (it stood aside, taking the alias for an app's own subclass, and admitted
 * everything), and per-user limits must still wait for a global auth guard registered after it.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  Module,
  UnauthorizedException,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimit, RateLimitModule } from '../../lib/index.js';
import { PLATFORMS, type Platform } from './support/app.js';

/**
 * What `@nestjs/observe` 0.3's instrument does to each provider and controller: a Proxy whose
 * methods are wrappers of their own (one per method, cached) that run on the instance and
 * carry the method's name, length and reflect-metadata, so decorators still read them.
 */
function wrapMethods(instance: object): object {
  const wrappers = new Map<unknown, unknown>();
  return new Proxy(instance, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function' || property === 'constructor') return value;
      let wrapper = wrappers.get(value);
      if (!wrapper) {
        const method = value as (...args: unknown[]) => unknown;
        const traced = (...args: unknown[]) => method.apply(target, args);
        Object.defineProperty(traced, 'name', { value: method.name });
        Object.defineProperty(traced, 'length', { value: method.length });
        for (const key of Reflect.getMetadataKeys(method) as unknown[]) {
          Reflect.defineMetadata(key, Reflect.getMetadata(key, method), traced);
        }
        wrappers.set(value, (wrapper = traced));
      }
      return wrapper;
    },
  });
}

/** Built-ins backed by internal slots (Nest's own `Map` subclasses) are left alone, as Observe does. */
const wrapped = (instance: unknown): instance is object =>
  typeof instance === 'object' && instance !== null && !(instance instanceof Map);

/** The two ways an instance decorator can wrap a provider: a Proxy, or an object delegating to it. */
const INSTRUMENTS = [
  {
    name: "a Proxy, as @nestjs/observe's",
    instrument: {
      instanceDecorator: (i: unknown): unknown => (wrapped(i) ? wrapMethods(i) : i),
    },
  },
  {
    name: 'delegation (Object.create)',
    instrument: {
      instanceDecorator: (i: unknown): unknown => (wrapped(i) ? Object.create(i) : i),
    },
  },
];

@Controller('reports')
class ReportsController {
  @Get()
  @RateLimit('2/m')
  list() {
    return 'ok';
  }
}

/** The Nest docs' global auth guard: the user from a header, else 401. */
@Injectable()
class AuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string>; user?: unknown }>();
    const id = request.headers['x-user'];
    if (!id) throw new UnauthorizedException();
    request.user = { id };
    return true;
  }
}

@Module({ providers: [{ provide: APP_GUARD, useClass: AuthGuard }] })
class AuthModule {}

@Module({
  imports: [RateLimitModule.forRoot({ store: 'memory' })],
  controllers: [ReportsController],
})
class QuickStartModule {}

@Module({
  imports: [RateLimitModule.forRoot({ store: 'memory' }), AuthModule],
  controllers: [ReportsController],
})
class AuthAfterModule {}

let app: INestApplication | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function start(
  platform: Platform,
  module: Type,
  instrument: (typeof INSTRUMENTS)[number]['instrument'],
): Promise<string> {
  const options = { logger: false as const, abortOnError: false, instrument };
  app =
    platform === 'fastify'
      ? await NestFactory.create(module, new FastifyAdapter(), options)
      : await NestFactory.create(module, options);
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

async function statuses(url: string, n: number, headers: Record<string, string> = {}) {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await fetch(`${url}/reports`, { headers })).status);
  return out;
}

describe.each(PLATFORMS.flatMap((platform) => INSTRUMENTS.map((i) => ({ platform, ...i }))))(
  'an app started with instrument ($platform, $name)',
  ({ platform, instrument }) => {
    it('the module guard decides: 2/m admits 2 and refuses the third with Retry-After', async () => {
      const url = await start(platform, QuickStartModule, instrument);
      expect(await statuses(url, 2)).toEqual([200, 200]);
      const refused = await fetch(`${url}/reports`);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });

    it('a global auth guard imported after the module: two users behind one address each get 2', async () => {
      const url = await start(platform, AuthAfterModule, instrument);
      expect(await statuses(url, 3, { 'x-user': 'alice' })).toEqual([200, 200, 429]);
      expect(await statuses(url, 3, { 'x-user': 'bob' })).toEqual([200, 200, 429]);
    });
  },
);
