import { Controller, Get } from '@nestjs/common';
import { RateLimit, SkipRateLimit } from 'nest-rate-limit';

// Three requests a minute per client on each route of this controller, except /cats/health.
@Controller('cats')
@RateLimit('3/m')
export class CatsController {
  @Get()
  findAll(): string[] {
    return ['Tom', 'Felix'];
  }

  @Get('health')
  @SkipRateLimit()
  health(): { status: string } {
    return { status: 'ok' };
  }
}
