import { Global, Module, type DynamicModule, type Provider } from '@nestjs/common';
import { THROTTLER_OPTIONS } from './constants.js';
import type { ThrottlerAsyncOptions, ThrottlerModuleOptions } from './options.js';
import { createThrottlerProviders, ThrottlerStorageProvider } from './providers.js';

/**
 * The throttler's module: its options and its storage, global. As with the throttler, the
 * guard is yours to register (`{ provide: APP_GUARD, useClass: ThrottlerGuard }`).
 */
@Global()
@Module({})
export class ThrottlerModule {
  /** @param options the throttlers (`ttl` in **ms**), alone or with common settings */
  static forRoot(options: ThrottlerModuleOptions = []): DynamicModule {
    const providers = [...createThrottlerProviders(options), ThrottlerStorageProvider];
    return { module: ThrottlerModule, providers, exports: providers };
  }

  static forRootAsync(options: ThrottlerAsyncOptions): DynamicModule {
    const providers = [...this.createAsyncProviders(options), ThrottlerStorageProvider];
    return {
      module: ThrottlerModule,
      imports: options.imports || [],
      providers,
      exports: providers,
    };
  }

  private static createAsyncProviders(options: ThrottlerAsyncOptions): Provider[] {
    if (options.useExisting || options.useFactory) {
      return [this.createAsyncOptionsProvider(options)];
    }
    return [
      this.createAsyncOptionsProvider(options),
      { provide: options.useClass!, useClass: options.useClass! },
    ];
  }

  private static createAsyncOptionsProvider(options: ThrottlerAsyncOptions): Provider {
    if (options.useFactory) {
      return {
        provide: THROTTLER_OPTIONS,
        useFactory: options.useFactory,
        inject: options.inject || [],
      };
    }
    return {
      provide: THROTTLER_OPTIONS,
      useFactory: async (factory: { createThrottlerOptions(): unknown }) =>
        await factory.createThrottlerOptions(),
      inject: [options.useExisting || options.useClass!],
    };
  }
}
