/**
 * Apollo Server 5 reaches Express only through `@as-integrations/express5`, which
 * `@nestjs/apollo` loads when an app starts on Express. When that package is not installed,
 * this registers a stand-in: the same contract (Apollo's `executeHTTPGraphQLRequest` over the
 * Express request, the app's `context` given `{ req, res }`, Apollo's status and headers
 * copied to the response), so the tests still run a real ApolloServer on a real Express app.
 * Call it before `@nestjs/apollo` is imported.
 */
import { createRequire } from 'node:module';
import { jest } from '@jest/globals';
import { HeaderMap, type ApolloServer, type BaseContext } from '@apollo/server';

const INTEGRATION = '@as-integrations/express5';

interface ExpressRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}
interface ExpressResponse {
  statusCode: number;
  setHeader(name: string, value: string): void;
  send(body: string): void;
  write(chunk: string): void;
  end(): void;
}
type ContextFn = (argument: { req: ExpressRequest; res: ExpressResponse }) => Promise<BaseContext>;

function expressMiddleware(server: ApolloServer<BaseContext>, options?: { context?: ContextFn }) {
  const context: ContextFn = options?.context ?? (async () => ({}));
  return (req: ExpressRequest, res: ExpressResponse, next: (error: unknown) => void): void => {
    const headers = new HeaderMap();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
    server
      .executeHTTPGraphQLRequest({
        httpGraphQLRequest: {
          method: req.method.toUpperCase(),
          headers,
          search: new URL(req.url, 'http://localhost').search,
          body: req.body,
        },
        context: () => context({ req, res }),
      })
      .then(async (response) => {
        for (const [name, value] of response.headers) res.setHeader(name, value);
        res.statusCode = response.status ?? 200;
        if (response.body.kind === 'complete') return res.send(response.body.string);
        for await (const chunk of response.body.asyncIterator) res.write(chunk);
        res.end();
      })
      .catch(next);
  };
}

/** True when the real integration is installed (then nothing is registered). */
export function useApolloExpressIntegration(): boolean {
  try {
    createRequire(import.meta.url).resolve(INTEGRATION);
    return true;
  } catch {
    jest.unstable_mockModule(INTEGRATION, () => ({ expressMiddleware }), { virtual: true });
    return false;
  }
}
