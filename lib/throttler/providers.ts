import type { Provider } from '@nestjs/common';
import { THROTTLER_OPTIONS } from './constants.js';
import { ThrottlerStorageService } from './memory-storage.js';
import type { ThrottlerModuleOptions } from './options.js';
import { ThrottlerStorage } from './storage.js';

/** The options, as given to `forRoot`. */
export function createThrottlerProviders(options: ThrottlerModuleOptions): Provider[] {
  return [{ provide: THROTTLER_OPTIONS, useValue: options }];
}

/** The storage: the options' `storage`, else a new in-memory one. */
export const ThrottlerStorageProvider: Provider = {
  provide: ThrottlerStorage,
  useFactory: (options: ThrottlerModuleOptions) =>
    !Array.isArray(options) && options.storage ? options.storage : new ThrottlerStorageService(),
  inject: [THROTTLER_OPTIONS],
};

/** The injection token of the module options. */
export const getOptionsToken = (): string => THROTTLER_OPTIONS;
/** The injection token of the storage. */
export const getStorageToken = (): symbol => ThrottlerStorage;
