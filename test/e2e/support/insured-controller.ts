/** The route of the insurance tests: `5/m`, fixed window, insurance limits while the store fails. */
import { Controller, Get } from '@nestjs/common';
import { RateLimit } from '../../../lib/index.js';

@Controller('insured')
export class InsuredController {
  @Get()
  @RateLimit('5/m', { algorithm: 'fixed-window', onStoreFailure: 'local' })
  insured() {
    return 'ok';
  }
}
