import { Controller, Get, Header } from '@nestjs/common';
import { register } from 'prom-client';
import { SkipRateLimit } from 'nest-rate-limit';

/**
 * Prometheus scrapes this (docs/observability/ has the dashboard and alerts for it). Never
 * limited: a refused scrape would show as a gap in every panel.
 */
@Controller('metrics')
@SkipRateLimit()
export class MetricsController {
  @Get()
  @Header('Content-Type', register.contentType)
  scrape(): Promise<string> {
    return register.metrics();
  }
}
