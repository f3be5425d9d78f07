import { createHash } from 'node:crypto';

/** Hex SHA-256 of `text`: how the default `generateKey` names a budget. */
export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
