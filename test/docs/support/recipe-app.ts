/**
 * Boots a docs page's recipe (a block that exports `AppModule`) as a real Nest app on Express
 * or Fastify, listening on 127.0.0.1, and sends it requests.
 */
import { createHmac } from 'node:crypto';
import type { INestApplication, Type } from '@nestjs/common';
import { bootstrap, rateLimitHeadersOf, type Platform, type Reply } from '../../e2e/support/app.js';
import { writeBlock } from './doc-blocks.js';

export interface RecipeApp {
  app: INestApplication;
  /** The recipe's exports. */
  exports: Record<string, unknown>;
  send(
    method: string,
    path: string,
    headers?: Record<string, string>,
    body?: unknown,
  ): Promise<Reply>;
  get(path: string, headers?: Record<string, string>): Promise<Reply>;
  close(): Promise<void>;
}

/**
 * Writes `code` as its own module (`file`), sets `env` (read by the recipe when its module
 * is decorated, at import), imports it, and boots `pick(exports)` (default its `AppModule`).
 */
export async function bootRecipe(
  file: string,
  code: string,
  platform: Platform,
  env: Record<string, string>,
  pick: (exports: Record<string, unknown>) => unknown = (e) => e.AppModule,
): Promise<RecipeApp> {
  Object.assign(process.env, env);
  const exports = (await import(writeBlock(file, code).href)) as Record<string, unknown>;
  const app = await bootstrap(platform, pick(exports) as Type);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  const send: RecipeApp['send'] = async (method, path, headers = {}, body) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return {
      status: response.status,
      headers: response.headers,
      body: parsed,
      rl: rateLimitHeadersOf(response),
    };
  };
  return {
    app,
    exports,
    send,
    get: (path, headers) => send('GET', path, headers),
    close: () => app.close(),
  };
}

/** An HS256 JWT of `claims`, signed with `secret` (what @nestjs/jwt's `sign` makes). */
export function signHs256(claims: Record<string, unknown>, secret: string): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}`;
  return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`;
}

/** Sends `n` requests one after the other. */
export async function sequence(n: number, send: () => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < n; i++) replies.push(await send());
  return replies;
}
