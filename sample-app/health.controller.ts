import { Controller, Get } from '@nestjs/common';
import { SkipRateLimit } from 'nest-rate-limit';

/** Load balancer and orchestrator probes: never limited, or a busy client could fail them. */
@Controller('health')
@SkipRateLimit()
export class HealthController {
  @Get()
  health() {
    return { status: 'ok' };
  }
}
