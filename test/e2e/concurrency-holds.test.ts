/**
 * Held slots: a handler that writes the response itself (`@Res()`)
 * holds its slot until the response ends, and
 * an `includeUpload` decision made for one route never stands for another that shares its
 * method and path (versioning). Handlers count themselves: "at once" is what the server did.
 */
import 'reflect-metadata';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  Post,
  RequestTimeoutException,
  Res,
  VersioningType,
  type CallHandler,
  type ExecutionContext,
  type INestApplication,
  type NestInterceptor,
} from '@nestjs/common';
import { catchError, Observable, throwError, timeout, TimeoutError } from 'rxjs';
import {
  ConcurrencyLimit,
  keys,
  RateLimit,
  RateLimitService,
  type PolicyInput,
} from '../../lib/index.js';
import { ownsResponse } from '../../lib/nest/end/response-owner.js';
import { redisUrl } from '../harness/redis.js';
import {
  bootstrap,
  PLATFORMS,
  pollUntil,
  rootModule,
  uniquePrefix,
  type Platform,
} from './support/app.js';

/** Handlers inside, the most at once, and the gates they wait on. */
const work = { now: 0, max: 0, gates: [] as (() => void)[] };
const openGates = () => work.gates.splice(0).forEach((open) => open());
async function held(): Promise<void> {
  work.now++;
  work.max = Math.max(work.max, work.now);
  await new Promise<void>((resolve) => work.gates.push(resolve));
  work.now--;
}

/** Subscriptions of the `never` handler's Observable still open. */
const never = { subscribed: 0 };

/** Responses `@Res()` handlers have not written yet; each writes when called. */
const unsent: (() => void)[] = [];

@Controller('holds')
class HoldsController {
  @Get('pass')
  @ConcurrencyLimit(1, { key: keys.ip })
  pass(@Res({ passthrough: true }) res: { header(name: string, value: string): unknown }) {
    res.header('x-passed', '1');
    return 'passed';
  }

  @Get('slow')
  @ConcurrencyLimit(1, { key: keys.ip })
  async slow() {
    await held();
    return 'done';
  }

  /** Never emits: counts its subscriptions still open. */
  @Get('never')
  @ConcurrencyLimit(1, { key: keys.ip })
  never() {
    return new Observable<string>(() => {
      never.subscribed++;
      return () => never.subscribed--;
    });
  }

  @Get('res')
  @ConcurrencyLimit(1, { key: keys.ip })
  res(@Res() res: { send(body: string): unknown }) {
    unsent.push(() => res.send('x'));
  }

  @Get('res-now')
  @ConcurrencyLimit(1, { key: keys.ip })
  resNow(@Res() res: { send(body: string): unknown }) {
    res.send('x');
  }
}

@Controller({ path: 'versioned', version: '1' })
class V1Controller {
  @Post('up')
  @ConcurrencyLimit(1, { key: keys.ip, includeUpload: true })
  up() {
    return 'v1';
  }
}

@Controller({ path: 'versioned', version: '2' })
class V2Controller {
  @Post('up')
  @RateLimit('2/m', { key: keys.ip })
  up() {
    return 'v2';
  }
}

/** The TimeoutInterceptor of Nest's documentation, with 200 ms. */
@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      timeout(200),
      catchError((error: unknown) =>
        throwError(() =>
          error instanceof TimeoutError ? new RequestTimeoutException() : (error as Error),
        ),
      ),
    );
  }
}

const IP = 'ip:127.0.0.1';
const slot = (route: string): PolicyInput => ({
  name: 'concurrent',
  concurrent: 1,
  scope: `HoldsController.${route}`,
});

async function start(platform: Platform, setup: (app: INestApplication) => void) {
  const module = rootModule({ redis: redisUrl(), prefix: uniquePrefix(), timeoutMs: 2000 }, [
    HoldsController,
    V1Controller,
    V2Controller,
  ]);
  const app = await bootstrap(platform, module);
  setup(app);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return { app, url, service: app.get(RateLimitService) };
}

describe.each(PLATFORMS)(
  'slots held to the end of the work, whoever writes the response, on %s',
  (platform) => {
    let h: Awaited<ReturnType<typeof start>>;
    beforeAll(async () => {
      h = await start(platform, (app) => {
        app.useGlobalInterceptors(new TimeoutInterceptor());
        app.enableVersioning({ type: VersioningType.HEADER, header: 'x-api-version' });
      });
    });
    afterEach(async () => {
      openGates();
      unsent.splice(0).forEach((send) => send());
      await pollUntil(() => Promise.resolve(work.now === 0), 5000);
      await h.service.reset(IP);
    });
    afterAll(() => h.app.close());

    const free = async (route: string) =>
      (await h.service.peek(IP, [slot(route)])).policies[0]!.remaining;

    it('a handler with @Res() holds its slot until it has written the response', async () => {
      const first = fetch(`${h.url}/holds/res`);
      expect(await pollUntil(() => Promise.resolve(unsent.length === 1), 5000)).toBe(true);
      let probe: number | undefined;
      void fetch(`${h.url}/holds/res`).then((r) => (probe = r.status));
      await pollUntil(() => Promise.resolve(probe !== undefined || unsent.length > 1), 5000);
      expect({ probe, writing: unsent.length }).toEqual({ probe: 429, writing: 1 });
      unsent.splice(0).forEach((send) => send());
      expect((await first).status).toBe(200);
      expect(await pollUntil(async () => (await free('res')) === 1, 5000)).toBe(true);
    });

    // Review of H1's first fix, which kept the handler's subscription after timeout() gave up:
    // an Observable handler was then never cancelled, and its slot held until leaseMs (408,
    // then 429). Known gap kept instead (README): an async handler's slot comes back at 408.
    it('an app-wide timeout() cancels an Observable handler and gives its slot back', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await fetch(`${h.url}/holds/never`)).status);
      expect({ statuses, subscribed: never.subscribed }).toEqual({
        statuses: [408, 408, 408],
        subscribed: 0,
      });
      expect(await free('never')).toBe(1);
    });

    it('a handler that writes through @Res() before returning gives its slot back', async () => {
      for (let i = 0; i < 3; i++) expect((await fetch(`${h.url}/holds/res-now`)).status).toBe(200);
      expect(await pollUntil(async () => (await free('resNow')) === 1, 5000)).toBe(true);
    });

    it('@Res({ passthrough: true }) is not a handler that writes the response itself', () => {
      expect(ownsResponse(HoldsController, HoldsController.prototype.pass)).toBe(false);
      expect(ownsResponse(HoldsController, HoldsController.prototype.res)).toBe(true);
    });

    it('includeUpload on v1 leaves v2 of the same method and path to its own policies', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${h.url}/versioned/up`, {
          method: 'POST',
          headers: { 'x-api-version': '2', 'content-type': 'application/json' },
          body: '{}',
        });
        statuses.push(r.status);
      }
      expect(statuses).toEqual([201, 201, 429, 429, 429]);
      // v1's slot was taken and given back by none of them.
      const v1 = { name: 'concurrent', concurrent: 1, scope: 'V1Controller.up' };
      expect((await h.service.peek(IP, [v1])).policies[0]!.remaining).toBe(1);
    });
  },
);
