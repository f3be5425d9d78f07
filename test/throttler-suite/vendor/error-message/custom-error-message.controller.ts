import { Controller, Get } from '@nestjs/common';
import { SkipThrottle } from '../../throttler.js';

@Controller()
export class CustomErrorMessageController {
  @SkipThrottle({ other: true })
  @Get('default')
  defaultRoute() {
    return { success: true };
  }

  @SkipThrottle({ default: true })
  @Get('other')
  otherRoute() {
    return { success: true };
  }
}
