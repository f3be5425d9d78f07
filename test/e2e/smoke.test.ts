import 'reflect-metadata';
import { expect, it } from '@jest/globals';
import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';

@Controller()
class HiController {
  @Get('hi') hi() {
    return { hi: 1 };
  }
}
@Module({ controllers: [HiController] })
class AppModule {}

it.each(['express', 'fastify'])('boots %s', async (platform) => {
  const app: INestApplication =
    platform === 'fastify'
      ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })
      : await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  const res = await fetch(`${url}/hi`);
  expect(await res.json()).toEqual({ hi: 1 });
  await app.close();
});
