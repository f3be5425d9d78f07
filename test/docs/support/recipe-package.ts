/**
 * What `import ... from 'nest-rate-limit'` resolves to in a docs page's code block under test:
 * the package as built from lib/, except that each `RateLimitModule.forRoot` call gets a key
 * prefix of its own, so a recipe booted once per platform (and suites running beside it on
 * the same Redis) never share counts. The recipe's code is otherwise run as written.
 */
import { randomUUID } from 'node:crypto';
import type { DynamicModule } from '@nestjs/common';
import {
  RateLimitModule as PackageModule,
  type RateLimitModuleOptions,
} from '../../../lib/index.js';

export * from '../../../lib/index.js';

export class RateLimitModule extends PackageModule {
  static override forRoot(options: RateLimitModuleOptions): DynamicModule {
    return PackageModule.forRoot({ ...options, prefix: `doc${randomUUID().slice(0, 8)}` });
  }
}
