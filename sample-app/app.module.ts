import { Module } from '@nestjs/common';
import { RateLimitModule } from 'nest-rate-limit';
import { AuthController } from './auth.controller.js';
import { HealthController } from './health.controller.js';
import { ItemsController } from './items.controller.js';
import { MetricsController } from './metrics.controller.js';
import { OrdersController } from './orders.controller.js';
import { ReportsController } from './reports.controller.js';
import { SearchController } from './search.controller.js';

const redisUrl = process.env.REDIS_URL;

@Module({
  imports: [
    RateLimitModule.forRoot({
      // Shared by every instance on the same Redis; without it, each process counts alone.
      ...(redisUrl ? { redis: redisUrl } : { store: 'memory' as const }),
      // Our own key prefix, so the sample never touches other data in the same database.
      prefix: 'sample',
      // Every route not limited otherwise: 300 requests a minute per user (or per IP).
      default: '300/m',
      // Prometheus metrics in prom-client's global registry, served at GET /metrics.
      metrics: true,
    }),
  ],
  controllers: [
    AuthController,
    SearchController,
    ReportsController,
    OrdersController,
    ItemsController,
    HealthController,
    MetricsController,
  ],
})
export class AppModule {}
