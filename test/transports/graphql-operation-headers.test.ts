/**
 * Issue 25, items 4 and 6, on Apollo (Express) and Mercurius (Fastify):
 * - when several decisions share an operation's HTTP response (its fields, its budget), the
 *   headers describe the most restrictive one, and always the refusal, whatever the order the
 *   fields were decided in (they described the last field decided: a refused operation could
 *   carry `X-RateLimit-Remaining: 98` and leave out the policy that refused);
 * - a per-user policy on a resolver with a guard of its own is reported at bootstrap: the
 *   global guard decides it before that guard has set the user; so is the operation budget
 *   when any resolver authenticates with a guard (it is charged before every resolver).
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, UseGuards, type CanActivate } from '@nestjs/common';
import { Query, Resolver } from '@nestjs/graphql';
import { RateLimit } from '../../lib/index.js';
import { CapturingLogger } from '../e2e/support/app.js';
import { createGraphQLApp, SERVERS, type GraphQLApp } from './support/graphql.js';

@Resolver()
class FieldsResolver {
  @Query(() => String, { nullable: true })
  @RateLimit('3/m', { name: 'tight' })
  tight() {
    return 'tight';
  }

  @Query(() => String, { nullable: true })
  @RateLimit('100/m', { name: 'loose' })
  loose() {
    return 'loose';
  }
}

@Injectable()
class AuthGuard implements CanActivate {
  canActivate() {
    return true;
  }
}

@Resolver()
class GuardedResolver {
  @Query(() => String)
  @UseGuards(AuthGuard)
  @RateLimit('10/m', { name: 'per-user' })
  account() {
    return 'account';
  }
}

describe.each(SERVERS)('an operation’s headers on %s', (server) => {
  let h: GraphQLApp;
  const logger = new CapturingLogger();
  let n = 0;
  const client = () => ({ 'x-forwarded-for': `198.51.100.${++n}` });

  beforeAll(async () => {
    h = await createGraphQLApp(server, {
      // The operation budget too: its headers compete with the fields' (100 points: never the
      // most restrictive here).
      rateLimit: { trustedProxies: 1, graphql: { budget: '100/m' } },
      providers: [FieldsResolver, GuardedResolver, AuthGuard],
      logger,
    });
  });
  afterAll(() => h.close());

  it.each(['{ tight loose }', '{ loose tight }'])(
    '%s: the most restrictive decision, whichever was decided last',
    async (query) => {
      const reply = await h.query(query, client());
      expect(reply.data).toEqual({ tight: 'tight', loose: 'loose' });
      expect(reply.headers.get('x-ratelimit-limit')).toBe('3');
      expect(reply.headers.get('x-ratelimit-remaining')).toBe('2');
    },
  );

  it('a refusal, even when an admitted field is decided after it', async () => {
    const from = client();
    for (let i = 0; i < 3; i++) await h.query('{ tight }', from);
    const reply = await h.query('{ tight loose }', from);
    expect(reply.data).toEqual({ tight: null, loose: 'loose' });
    expect(reply.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    expect(Number(reply.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(reply.headers.get('x-ratelimit-limit')).toBe('3');
    expect(reply.headers.get('x-ratelimit-remaining')).toBe('0');
  });

  it('reports a per-user policy decided before a resolver’s own guard, at bootstrap', () => {
    const warnings = logger.lines
      .filter((l) => l.level === 'warn' && l.message.includes('rate_limit.unenforced'))
      .map((l) => l.message);
    const account = warnings.filter((m) => m.includes('"route":"GuardedResolver.account"'));
    expect(account).toHaveLength(1);
    expect(account[0]).toContain('per-user');
    expect(account[0]).toContain('GraphQL context function');
    // Resolvers without a guard of their own are not reported.
    expect(warnings.some((m) => m.includes('FieldsResolver'))).toBe(false);
  });

  it('reports the operation budget that reads the user in an app whose resolvers authenticate with guards', () => {
    const budget = logger.lines.filter(
      (l) => l.level === 'warn' && l.message.includes('"route":"GraphQL operation"'),
    );
    expect(budget).toHaveLength(1);
    expect(budget[0]!.message).toContain('policy \\"cost\\" reads the user');
    expect(budget[0]!.message).toContain('GuardedResolver.account');
  });
});
