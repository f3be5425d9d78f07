import { describe, expect, it } from '@jest/globals';
import { applicableOverride, readControl } from '../../lib/core/operator/control.js';

/** The TypeScript reading of a control hash must match the consume script's (second review). */
describe('control fields', () => {
  const now = 1_000_000;
  const until = now + 60_000;

  it('reads a well-formed override and exemption', () => {
    expect(applicableOverride({ 'o:*:*': `${until}:50:60000:0` }, now, 'api', 'default')).toEqual({
      limit: 50,
      periodMs: 60_000,
      expiresInMs: 60_000,
    });
    expect(readControl({ exempt: String(until), 'r:exempt': 'why' }, now).exemption).toEqual({
      expiresInMs: 60_000,
      reason: 'why',
    });
  });

  it.each([
    ['limit × period above 2^50', `${until}:100000000:100000000:0`],
    ['burst × period above 2^50', `${until}:1:60000:99999999999999999999`],
    ['an exponent', `${until}:1e1:1000:0`],
    ['an empty burst', `${until}:5:1000:`],
    ['a leading space', ` ${until}:5:1000:0`],
    ['a limit of 0', `${until}:0:1000:0`],
  ])('ignores an override with %s, as the script does', (_label, value) => {
    expect(applicableOverride({ 'o:*:*': value }, now, 'api', 'default')).toBeUndefined();
  });

  it.each(['1e13', ' 5000000', '99999999999999999999'])(
    'ignores an exemption of %p, as the script does',
    (value) => {
      expect(readControl({ exempt: value }, now).exemption).toBeUndefined();
    },
  );
});
