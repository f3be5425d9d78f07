/**
 * The HTTP benchmark alone, on a private Redis (redis-server on the PATH) so nothing else
 * competes for it or reads its keys:
 *
 *   npm run build && npx tsc -p bench/tsconfig.json && node dist-sample/bench/http/main.js
 *
 *   BENCH_ROUNDS=3  BENCH_DURATION=4 (seconds per variant per round)  BENCH_CONNECTIONS=64
 */
import { spawn } from 'node:child_process';
import { freePort, runHttpBench } from './index.js';

const env = process.env;
const began = Date.now();
const port = await freePort();
const redis = spawn(
  'redis-server',
  ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const killRedis = () => redis.kill('SIGKILL');
process.on('exit', killRedis);
const redisExited = new Promise<void>((resolve) => redis.once('exit', () => resolve()));
try {
  await new Promise<void>((resolve, reject) => {
    let output = '';
    redis.once('error', reject); // e.g. not on the PATH
    void redisExited.then(() => reject(new Error(`redis-server exited:\n${output}`)));
    redis.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('Ready to accept connections')) resolve();
    });
  });
  await runHttpBench({
    redisUrl: `redis://127.0.0.1:${port}`,
    rounds: Number(env.BENCH_ROUNDS ?? 3),
    durationS: Number(env.BENCH_DURATION ?? 4),
    connections: Number(env.BENCH_CONNECTIONS ?? 64),
    log: (line) => console.log(line),
  });
  console.log(`total ${((Date.now() - began) / 1000).toFixed(1)} s`);
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  process.off('exit', killRedis);
  // Not when it never started (spawn error) or has already gone: no exit event would come.
  if (redis.pid !== undefined && redis.exitCode === null && redis.signalCode === null) {
    redis.kill('SIGTERM');
    await redisExited;
  }
}
