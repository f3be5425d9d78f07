import { Injectable } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';

/** Counts API clients by their key, and everyone else by IP address. */
@Injectable()
export class ApiKeyThrottlerGuard extends ThrottlerGuard {
  protected getTracker(req: Record<string, any>): Promise<string> {
    const headers = req.headers as Record<
      string,
      string | string[] | undefined
    >;
    const apiKey = headers['x-api-key'];
    return Promise.resolve(
      typeof apiKey === 'string' && apiKey !== ''
        ? `key:${apiKey}`
        : `ip:${String(req.ip)}`,
    );
  }
}
