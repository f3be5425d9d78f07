import { Module } from '@nestjs/common';
import { RateLimitModule } from 'nest-rate-limit';
import { AppController } from './app.controller';
import { AppService } from './app.service';
import { CatsModule } from './cats/cats.module';

@Module({
  imports: [
    // Counts in Redis when REDIS_URL is set, else in this process's memory.
    RateLimitModule.forRoot({ redis: process.env.REDIS_URL, default: '100/m' }),
    CatsModule,
  ],
  controllers: [AppController],
  providers: [AppService],
})
export class AppModule {}
