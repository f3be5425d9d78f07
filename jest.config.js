/**
 * Jest in ESM mode (run through `node --experimental-vm-modules`, see `npm test`).
 * The global setup gives every suite a real Redis (standalone and Cluster): see test/harness.
 *
 * NEST_PEERS_DIR points the @nestjs packages at another install (e.g. NestJS 10 or 11 in
 * .nest10/ and .nest11/, see `npm run test:nest11`), so the e2e suite runs against each supported major.
 * @type {import('jest').Config}
 */
const nestPeers = process.env.NEST_PEERS_DIR;

/**
 * Suites that measure latency in ms against `timeoutMs` + 50 ms, or real Redis time: `npm
 * test` (scripts/test.mjs) runs them alone, after the rest, so that another worker's load does
 * not stretch what they measure. NRL_TIMING=1 selects them; without it they are left out.
 */
const TIMING = [
  'test/e2e/slow-redis.test.ts',
  'test/e2e/failure.test.ts',
  'test/integration/operate.test.ts',
  'test/integration/operate.cluster.test.ts',
  'test/failover/sentinel-failover.test.ts',
  'test/failover/cluster-failover.test.ts',
  'test/integration/server-clock.test.ts',
  // Concurrency limits across 4 Nest processes, and leases on the Redis clock.
  'test/integration/concurrency-limit.test.ts',
];
const timingPass = process.env.NRL_TIMING === '1';

export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    ...(nestPeers && {
      '^@nestjs/(common|core|platform-express|platform-fastify|testing)$': `${nestPeers}/node_modules/@nestjs/$1`,
      // One rxjs, as in an app: the other install's Nest would otherwise load its own copy,
      // and its `instanceof Observable` fails on what our handlers return (an SSE stream
      // taken for a plain value).
      '^rxjs(/.*)?$': '<rootDir>/node_modules/rxjs$1',
    }),
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testMatch: timingPass ? TIMING.map((f) => `<rootDir>/${f}`) : ['<rootDir>/test/**/*.test.ts'],
  testPathIgnorePatterns: [
    '/node_modules/',
    ...(timingPass ? [] : TIMING.map((f) => `/${f.replaceAll('.', '\\.')}$`)),
  ],
  modulePathIgnorePatterns: [
    '<rootDir>/test/consumers/',
    '<rootDir>/.nest10/',
    '<rootDir>/.nest11/',
    '<rootDir>/dist/',
    '<rootDir>/dist-sample/',
  ],
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
