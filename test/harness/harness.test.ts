/** The harness's own test: the Redis that global setup provides, and private servers. */
import { describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import {
  disconnect,
  newCluster,
  newRedis,
  redisServerAvailable,
  startRedisServer,
} from './redis.js';

const prefix = `nrl-test:harness:${process.pid}:`;

describe('test harness', () => {
  it('provides a standalone Redis', async () => {
    const redis = newRedis();
    try {
      expect(await redis.ping()).toBe('PONG');
    } finally {
      await redis.quit();
    }
  });

  it('provides a 3-master Cluster that serves keys under 50 hash tags', async () => {
    const cluster = newCluster();
    const keys = Array.from({ length: 50 }, (_, i) => `${prefix}{tag-${i}}:key`);
    try {
      await Promise.all(keys.map((key, i) => cluster.set(key, `value-${i}`, 'EX', 60)));
      const values = await Promise.all(keys.map((key) => cluster.get(key)));
      expect(values).toEqual(keys.map((_, i) => `value-${i}`));
      expect(cluster.nodes('master')).toHaveLength(3);
      expect(String(await cluster.call('CLUSTER', 'INFO'))).toContain('cluster_size:3');
    } finally {
      await Promise.all(keys.map((key) => cluster.del(key)));
      await cluster.quit();
    }
  });

  const withServer = redisServerAvailable() ? it : it.skip;
  withServer('starts, kills and restarts a private redis-server', async () => {
    const server = await startRedisServer();
    const ping = async (): Promise<string> => {
      const client = new Redis(server.url, { lazyConnect: true, retryStrategy: () => null });
      client.on('error', () => {});
      try {
        await client.connect();
        return await client.ping();
      } finally {
        disconnect(client);
      }
    };
    try {
      expect(await ping()).toBe('PONG');
      await server.kill();
      await expect(ping()).rejects.toThrow();
      await server.restart();
      expect(await ping()).toBe('PONG');
    } finally {
      await server.stop();
    }
  });
});
