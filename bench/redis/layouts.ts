/**
 * Part 3b's layout probes (issue 23, items 2 and 3): the token-bucket/GCRA decision alone, in
 * two key layouts, so what a layout costs in Redis can be read apart from what the rest of
 * the consume script costs (controls, penalties, leases, the reply it builds).
 *
 * - **key per policy** (the layout CONSUME_SCRIPT has): each policy's debt in its own key's
 *   expiry; `PTTL`, then `PEXPIRE` when the emission interval is a whole number of ms, else
 *   `GET` of the sub-ms credit and `SET ... PX`.
 * - **key per identity**: every token-bucket/GCRA policy of the identity in one key, which
 *   expires at the latest TAT (E); its value lists `<tag>=<offset>/<L>;`, offset = (E − TAT)·L
 *   in ticks of 1/L ms (the credit folded in). `GET` and `PTTL`, one `SET ... PX`, whatever
 *   the number of policies; entries of the identity's other policies are kept, shifted.
 *
 * Both decide exactly as CONSUME_SCRIPT does on the server clock (all-or-nothing, a refusal
 * writes nothing) and take the same arguments: ARGV[1] the mode (ignored: always commit),
 * then per policy its tag, limit and periodMs (ms). Prototypes for measuring only.
 */
const PER_POLICY = `
local n = #KEYS
local debts, keeps = {}, {}
for i = 1, n do
  local L, P = ARGV[i * 3] + 0, ARGV[i * 3 + 1] + 0
  local ms, debt = redis.call('PTTL', KEYS[i]), 0
  if ms >= 0 then
    debt = ms * L
    if P % L == 0 then keeps[i] = true else debt = debt - (tonumber(redis.call('GET', KEYS[i])) or 0) end
  end
  if debt < 0 then debt = 0 end
  if debt + P > L * P then return 0 end
  debts[i] = debt + P
end
for i = 1, n do
  local L = ARGV[i * 3] + 0
  local ttl = math.ceil(debts[i] / L)
  if keeps[i] then redis.call('PEXPIRE', KEYS[i], string.format('%d', ttl))
  else redis.call('SET', KEYS[i], string.format('%d', ttl * L - debts[i]), 'PX', string.format('%d', ttl)) end
end
return 1
`;

const PER_IDENTITY = `
local s = redis.call('GET', KEYS[1])
local ms = redis.call('PTTL', KEYS[1])
if ms < 0 then ms = 0 end
local off, lim, new, E = {}, {}, {}, ms
if s then
  for t, o, l in string.gmatch(s, '(%w+)=(%d+)/(%d+);') do off[t], lim[t] = o + 0, l + 0 end
end
for i = 1, (#ARGV - 1) / 3 do
  local t, L, P = ARGV[i * 3 - 1], ARGV[i * 3] + 0, ARGV[i * 3 + 1] + 0
  local debt = ms * L - (off[t] or ms * L)
  if debt < 0 then debt = 0 end
  if debt + P > L * P then return 0 end
  debt = debt + P
  new[t] = { L, debt }
  local ttl = math.ceil(debt / L)
  if ttl > E then E = ttl end
end
local parts = {}
for t, o in pairs(off) do
  -- Another policy's entry, kept while its TAT is ahead (offset in its own ticks), shifted to E.
  local L = lim[t]
  if not new[t] and o < ms * L then parts[#parts + 1] = string.format('%s=%d/%d;', t, o + (E - ms) * L, L) end
end
for t, v in pairs(new) do parts[#parts + 1] = string.format('%s=%d/%d;', t, E * v[1] - v[2], v[1]) end
redis.call('SET', KEYS[1], table.concat(parts), 'PX', string.format('%d', E))
return 1
`;

export interface LayoutProbe {
  name: string;
  lua: string;
  keys: string[];
  args: (string | number)[];
}

/**
 * The probes for one policy and for two stacked ones, with the rates part 3b's contenders
 * use (`nrl-gcra`: `limit` per `periodMs`; `nrl-stacked`: the same plus 1,000,000 a day,
 * whose emission interval, 86.4 ms, is not a whole number of ms).
 */
export function layoutProbes(limit: number, periodMs: number): LayoutProbe[] {
  const burst = ['d', limit, periodMs];
  const daily = ['x', 1_000_000, 86_400_000];
  return [
    {
      name: 'layout: key per policy, 1',
      lua: PER_POLICY,
      keys: ['lp:{ip:__rand_int__}:global:default:gcra'],
      args: ['c', ...burst],
    },
    {
      name: 'layout: key per policy, 2',
      lua: PER_POLICY,
      keys: ['lp:{ip:__rand_int__}:global:default:gcra', 'lp:{ip:__rand_int__}:global:daily:gcra'],
      args: ['c', ...burst, ...daily],
    },
    {
      name: 'layout: key per identity, 1',
      lua: PER_IDENTITY,
      keys: ['li:{ip:__rand_int__}'],
      args: ['c', ...burst],
    },
    {
      name: 'layout: key per identity, 2',
      lua: PER_IDENTITY,
      keys: ['li2:{ip:__rand_int__}'],
      args: ['c', ...burst, ...daily],
    },
  ];
}
