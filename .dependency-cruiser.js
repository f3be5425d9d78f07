// Dependency rules for lib/ (issue 21), checked by `npm run lint` (`npm run lint:deps`):
// - no import cycles: no two files import each other in a circle, type imports included
//   (`tsPreCompilationDeps`: `import type` and `export type ... from` count as edges);
// - layers: core <- http <- nest. lib/core imports nothing else of lib, lib/http only
//   lib/core, and neither imports a `@nestjs/*` package; lib/nest may import both.
//   lib/client imports only lib/client and no Node built-in; lib/throttler (the
//   @nestjs/throttler drop-in) may import anything in lib, and nothing else of lib imports it.
// Only lib/ is cruised (`depcruise lib`): node_modules is resolved but never read, and the
// build output and the projects of their own are excluded should anyone cruise `.`.
/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'An import cycle (type imports count). Move the shared types to a leaf module, so ' +
        'that the dependencies point one way.',
      from: { path: '^lib/' },
      to: { circular: true },
    },
    {
      name: 'core-imports-only-core',
      severity: 'error',
      comment:
        'lib/core is the bottom layer (core <- http <- nest): it imports nothing of lib ' +
        'outside lib/core.',
      from: { path: '^lib/core/' },
      to: { path: '^lib/', pathNot: '^lib/core/' },
    },
    // Inside lib/core, by folder: the model and the algorithms (what a policy means) know
    // nothing of how a store is called or which store runs; the call, its end and the
    // operator's reads know the store only through its contract (stores/store.ts); the two
    // stores know nothing of each other; RateLimiter (limiter.ts) sits on top of them all.
    {
      name: 'core-model-no-engine',
      severity: 'error',
      comment:
        'lib/core/model (rates, policies, decisions, keys, refunds) is what a policy means: it ' +
        'imports the algorithms, the errors and the store contract, never how a store is ' +
        'called (call/, end/), the operator (operator/), a store or the limiter.',
      from: { path: '^lib/core/model/' },
      to: { path: '^lib/core/((call|end|operator|stores/(memory|redis))/|limiter\\.ts$)' },
    },
    {
      name: 'core-algorithms-no-engine',
      severity: 'error',
      comment:
        'lib/core/algorithms holds the reference math of each algorithm and its Lua body: the ' +
        'stores run it, so it imports no store (memory/, redis/), nor call/, end/, operator/ ' +
        'or the limiter.',
      from: { path: '^lib/core/algorithms/' },
      to: { path: '^lib/core/((call|end|operator|stores/(memory|redis))/|limiter\\.ts$)' },
    },
    {
      name: 'core-leaves',
      severity: 'error',
      comment:
        'algorithms/types.ts (the algorithm names and shapes) and stores/store.ts (the store ' +
        'contract) are leaves every core file may import without a cycle: types.ts imports ' +
        'nothing of lib, store.ts only types.ts.',
      from: { path: '^lib/core/(algorithms/types|stores/store)\\.ts$' },
      to: { path: '^lib/', pathNot: '^lib/core/algorithms/types\\.ts$' },
    },
    {
      name: 'core-call-no-store',
      severity: 'error',
      comment:
        'lib/core/call (the bounded store call and what protects it: deadlines, progress, ' +
        'circuit breaker, deny cache, known refusals) works on any RateLimitStore: it imports ' +
        'no store (memory/, redis/), nor end/, operator/ or the limiter.',
      from: { path: '^lib/core/call/' },
      to: { path: '^lib/core/((end|operator|stores/(memory|redis))/|limiter\\.ts$)' },
    },
    {
      name: 'core-end-no-store',
      severity: 'error',
      comment:
        'lib/core/end (refunds, releases and their retries once a request ends) calls any ' +
        'RateLimitStore through call/: it imports no store (memory/, redis/), nor operator/ or ' +
        'the limiter.',
      from: { path: '^lib/core/end/' },
      to: { path: '^lib/core/((operator|stores/(memory|redis))/|limiter\\.ts$)' },
    },
    {
      name: 'core-operator-no-store',
      severity: 'error',
      comment:
        "lib/core/operator (overrides, exemptions, inspection: an operator's reads and writes) " +
        'reads what any store answers: it imports no store (memory/, redis/), nor call/, end/ ' +
        'or the limiter.',
      from: { path: '^lib/core/operator/' },
      to: { path: '^lib/core/((call|end|stores/(memory|redis))/|limiter\\.ts$)' },
    },
    {
      name: 'core-memory-store-alone',
      severity: 'error',
      comment:
        'MemoryStore (lib/core/stores/memory) implements the store contract from the model, ' +
        'the algorithms and the operator rules: it imports nothing of RedisStore, of call/, ' +
        'end/ or the limiter.',
      from: { path: '^lib/core/stores/memory/' },
      to: { path: '^lib/core/((call|end|stores/redis)/|limiter\\.ts$)' },
    },
    {
      name: 'core-redis-store-alone',
      severity: 'error',
      comment:
        'RedisStore (lib/core/stores/redis, its scripts in lua/) implements the store contract ' +
        'from the model and the algorithms: it imports nothing of MemoryStore, of call/, end/, ' +
        'operator/ or the limiter.',
      from: { path: '^lib/core/stores/redis/' },
      to: { path: '^lib/core/((call|end|operator|stores/memory)/|limiter\\.ts$)' },
    },
    {
      name: 'core-limiter-on-top',
      severity: 'error',
      comment:
        'RateLimiter (lib/core/limiter.ts) is the engine core/ builds up to: no other file of ' +
        'lib/core imports it.',
      from: { path: '^lib/core/', pathNot: '^lib/core/limiter\\.ts$' },
      to: { path: '^lib/core/limiter\\.ts$' },
    },
    {
      name: 'http-imports-only-core',
      severity: 'error',
      comment:
        'lib/http sits on lib/core (core <- http <- nest): it imports nothing of lib but ' +
        'lib/core and lib/http.',
      from: { path: '^lib/http/' },
      to: { path: '^lib/', pathNot: '^lib/(core|http)/' },
    },
    {
      name: 'client-imports-only-client',
      severity: 'error',
      comment:
        'lib/client (nest-rate-limit/client) runs in browsers: it imports nothing of lib ' +
        'outside lib/client, so no Node-only module reaches it.',
      from: { path: '^lib/client/' },
      to: { path: '^lib/', pathNot: '^lib/client/' },
    },
    {
      name: 'client-no-node-builtins',
      severity: 'error',
      comment: 'lib/client runs in browsers: no Node built-in module.',
      from: { path: '^lib/client/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'main-entry-no-graphql-subpath',
      severity: 'error',
      comment:
        'nest-rate-limit/graphql (lib/graphql/index.ts) loads @nestjs/graphql for its decorators: ' +
        'the main entry and lib/nest reach the analysis through lib/graphql/cost.ts only.',
      from: { path: '^lib/(index\\.ts$|nest/)' },
      to: { path: '^lib/graphql/(index|decorators)\\.ts$' },
    },
    {
      name: 'graphql-imports-only-graphql',
      severity: 'error',
      comment:
        'lib/graphql (operation cost, issue 25) is pure: it imports nothing of lib but ' +
        'lib/graphql and lib/core, so the main entry can reach it without Nest or Redis.',
      from: { path: '^lib/graphql/' },
      to: { path: '^lib/', pathNot: '^lib/(graphql|core)/' },
    },
    {
      name: 'graphql-no-runtime-graphql',
      severity: 'error',
      comment:
        'graphql is an optional peer, and the app passes its own copy in (GraphQLRuntime): ' +
        'lib/graphql imports it for types only (`import type`).',
      from: { path: '^lib/graphql/' },
      to: { path: '(^|/)node_modules/graphql/|^graphql$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'graphql-no-nestjs',
      severity: 'error',
      comment:
        'lib/graphql works without Nest: only decorators.ts (nest-rate-limit/graphql) ' +
        'imports @nestjs/*.',
      from: { path: '^lib/graphql/', pathNot: '^lib/graphql/decorators\\.ts$' },
      to: { path: '(^|/)@nestjs/' },
    },
    {
      name: 'throttler-imported-by-throttler-only',
      severity: 'error',
      comment:
        'lib/throttler is the nest-rate-limit/throttler entry (the @nestjs/throttler drop-in): ' +
        'the rest of lib never imports it, so the main entry carries none of it.',
      from: { path: '^lib/', pathNot: '^lib/throttler/' },
      to: { path: '^lib/throttler/' },
    },
    {
      name: 'core-http-no-nestjs',
      severity: 'error',
      comment: 'lib/core and lib/http work without Nest: no @nestjs/* package (lib/nest only).',
      from: { path: '^lib/(core|http)/' },
      // Resolved (node_modules/@nestjs/...) or not (@nestjs/...).
      to: { path: '(^|/)@nestjs/' },
    },
    {
      name: 'no-unresolvable',
      severity: 'error',
      comment:
        'An import the cruiser cannot resolve is an edge it cannot see: a cycle or a layer ' +
        'breach through it would go unnoticed.',
      from: { path: '^lib/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: {
      path: '^(dist|dist-sample|coverage|bench/(node_modules|dist)|test/consumers|\\.nest1[01])/',
    },
    // Type-only imports are edges too.
    tsPreCompilationDeps: true,
    // NodeNext resolution: `./x.js` in a source file is `./x.ts`.
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
  },
};
