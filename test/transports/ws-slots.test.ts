/**
 * Issue 22, finding 4: on WebSockets a slot is given back when an interceptor that Nest runs
 * before ours throws (the handler never runs, and no response tells when the call ended):
 * the gateway's own `@UseInterceptors`, on the handler in any order or on the class.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Injectable,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { MessageBody, SubscribeMessage, WebSocketGateway, WsException } from '@nestjs/websockets';
import type { Observable } from 'rxjs';
import { ConcurrencyLimit, RateLimitService, type PolicyInput } from '../../lib/index.js';
import { pollUntil } from '../e2e/support/app.js';
import { createWsApp, WS_PLATFORMS, type WsAppHandle } from './support/ws-app.js';

/** Refuses the messages whose body is 'no', before the handler. */
@Injectable()
class RefuseNo implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (ctx.switchToWs().getData() === 'no') throw new WsException('refused by an interceptor');
    return next.handle();
  }
}

@WebSocketGateway()
class HandlerInterceptedGateway {
  // `@UseInterceptors` below the limit: applied first, so Nest would run it first.
  @SubscribeMessage('slot')
  @ConcurrencyLimit(1, { key: () => 'ws-handler' })
  @UseInterceptors(RefuseNo)
  slot(@MessageBody() body: string) {
    return { event: 'pong', data: body };
  }
}

@WebSocketGateway()
@UseInterceptors(RefuseNo)
class ClassInterceptedGateway {
  @SubscribeMessage('slot')
  @ConcurrencyLimit(1, { key: () => 'ws-class' })
  slot(@MessageBody() body: string) {
    return { event: 'pong', data: body };
  }
}

const cases = [
  ['on the handler', HandlerInterceptedGateway, 'ws-handler', 'HandlerInterceptedGateway.slot'],
  ['on the gateway class', ClassInterceptedGateway, 'ws-class', 'ClassInterceptedGateway.slot'],
] as const;

describe.each(WS_PLATFORMS)('%s: an interceptor before ours throws', (platform) => {
  describe.each(cases)('%s', (_where, gateway, identity, scope) => {
    let h: WsAppHandle;
    beforeAll(async () => {
      h = await createWsApp(platform, {}, [gateway], { providers: [RefuseNo] });
    });
    afterAll(() => h.close());

    it('the refused message leaves no slot held: the next one is answered', async () => {
      const service = h.app.get(RateLimitService);
      const policy: PolicyInput = { name: 'concurrent', concurrent: 1, scope };
      const client = await h.connect();
      const refused = await client.send('slot', 'no');
      expect(refused.event).toBe('exception');
      expect((refused.data as { message?: string }).message).toBe('refused by an interceptor');
      expect(
        await pollUntil(
          async () => (await service.peek(identity, [policy])).policies[0]!.remaining === 1,
          2000,
        ),
      ).toBe(true);
      expect(await client.send('slot', 'yes')).toEqual({ event: 'pong', data: 'yes' });
    });
  });
});
