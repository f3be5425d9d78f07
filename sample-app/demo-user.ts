import type { INestApplication } from '@nestjs/common';

type Request = { headers: Record<string, string | string[] | undefined>; user?: unknown };

/**
 * FOR THE DEMO ONLY: believes an `x-user` header and sets `request.user = { id }`, the way
 * a real authentication layer (Passport, a session) would after checking a token. Never
 * trust such a header in production: anyone can send it.
 */
function userFromHeader(request: Request): void {
  const id = request.headers['x-user'];
  if (typeof id === 'string' && id !== '') request.user = { id };
}

/**
 * Installs {@link userFromHeader} in front of the routes, on Express or Fastify. It must run
 * before the rate-limit guard, since the default key (`keys.userOrIp`) reads `request.user`.
 */
export function useDemoUsers(app: INestApplication): void {
  const adapter = app.getHttpAdapter();
  if (adapter.getType() === 'fastify') {
    // Nest middleware on Fastify gets the raw Node request, not the Fastify request that
    // guards read, so a hook sets the user there instead.
    const fastify = adapter.getInstance() as {
      addHook(
        hook: 'onRequest',
        fn: (req: Request, reply: unknown, done: () => void) => void,
      ): void;
    };
    fastify.addHook('onRequest', (req, _reply, done) => {
      userFromHeader(req);
      done();
    });
    return;
  }
  app.use((req: Request, _res: unknown, next: () => void) => {
    userFromHeader(req);
    next();
  });
}
