import { Controller, Get } from '@nestjs/common';
import { RateLimit } from 'nest-rate-limit';

/**
 * Orders: a mobile app polls this. Two stacked policies per user, all-or-nothing: a request
 * refused by `burst` spends nothing of `daily` (and the module default still applies).
 */
@Controller('orders')
@RateLimit('10/s', { name: 'burst' })
@RateLimit('5000/d', { name: 'daily' })
export class OrdersController {
  @Get()
  list() {
    return { orders: [] };
  }
}
