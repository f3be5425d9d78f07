import { Test, TestingModule } from '@nestjs/testing';
import { ThrottlerModule } from '@nestjs/throttler';
import { CatsController } from './cats.controller';

describe('CatsController', () => {
  let controller: CatsController;

  beforeEach(async () => {
    const moduleRef: TestingModule = await Test.createTestingModule({
      imports: [
        ThrottlerModule.forRoot([{ name: 'short', ttl: 1000, limit: 3 }]),
      ],
      controllers: [CatsController],
    }).compile();

    controller = moduleRef.get(CatsController);
  });

  it('lists the cats', () => {
    expect(controller.findAll()).toEqual([{ name: 'Tom' }]);
  });

  it('adds a cat', () => {
    expect(controller.create({ name: 'Felix' })).toEqual({ name: 'Felix' });
    expect(controller.findAll()).toEqual([{ name: 'Tom' }, { name: 'Felix' }]);
  });

  it('reports its health', () => {
    expect(controller.health()).toEqual({ status: 'ok' });
  });
});
