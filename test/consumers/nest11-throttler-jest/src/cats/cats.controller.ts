import { Body, Controller, Get, Post } from '@nestjs/common';
import { SkipThrottle, Throttle } from '@nestjs/throttler';

export interface Cat {
  name: string;
}

@Controller('cats')
export class CatsController {
  private readonly cats: Cat[] = [{ name: 'Tom' }];

  @Get()
  findAll(): Cat[] {
    return this.cats;
  }

  @Throttle({ short: { limit: 1, ttl: 1000 } })
  @Post()
  create(@Body() cat: Cat): Cat {
    this.cats.push(cat);
    return cat;
  }

  // A bare @SkipThrottle() skips only the throttler named 'default': name ours.
  @SkipThrottle({ short: true, long: true })
  @Get('health')
  health(): { status: string } {
    return { status: 'ok' };
  }
}
