import { Controller, Get, Param } from '@nestjs/common';
import { RateLimit } from 'nest-rate-limit';

/** Report exports: rare, but each one is expensive to produce. */
@Controller('reports')
export class ReportsController {
  @Get(':id/export')
  // An export spends 10 of the 60 units a minute: 6 back to back, then one every 10 s.
  @RateLimit('60/m', { cost: 10 })
  export(@Param('id') id: string) {
    return { report: id, format: 'csv', rows: 0 };
  }
}
