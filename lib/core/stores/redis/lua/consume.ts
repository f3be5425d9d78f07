import { createHash } from 'node:crypto';
import { fixedWindow } from '../../../algorithms/fixed-window.js';
import { slidingWindow } from '../../../algorithms/sliding-window.js';
import { CONTROL_LUA } from './control.js';
import { LEASE_LUA } from './lease.js';

/**
 * One script for every request: all policies of the request, any mix of algorithms,
 * decided and committed atomically, all-or-nothing: if one denies, none is spent.
 *
 * KEYS[i]: policy i's state key (all keys of a call share one hash tag). For a policy whose
 * algorithm code is negative, the script also reads its identity's control hash
 * `<prefix>:{<identity>}:ctl` (overrides, exemption): RedisStore makes it so for the
 * identities its index of controlled identities lists (see redis-control-index.ts), and for
 * every identity while it has no index; the others pay for no read.
 * ARGV[1]: the mode: `c` to commit an admitted request, `d` to decide only (writes
 * nothing), `b` to decide and write only penalties (a denial decided on Cluster), all on
 * the Redis server clock; tests add their clock in ms: `c<now>`, `d<now>`, `b<now>`.
 * Then, for each policy in turn: its algorithm code (1 fixed window, 2 sliding window, 3 token
 * bucket, 4 GCRA; negated: read the control hash), limit, periodMs, and only when the code has
 * 10 added (11 to 15), capacity and cost: without them capacity is the limit and cost is 1, the
 * common case, which so sends two values fewer (6% of a GCRA decision's instructions in
 * Redis). A policy with a penalty (see penalty.ts) gives its code as
 * `<code>b<blockMs>`, or `<code>B<blockMs>` to restart the block on a refusal during it
 * (`r`, `R`: the same, and the block's start deletes the policy's state, `blockResets`); its
 * block is the key `<KEYS[i]>:b` (same slot), read with PTTL (on a test clock: GET, the
 * value being the end in ms) only for such policies.
 * A concurrency limit gives its code as `5:<leaseId>` (`-5:<leaseId>`: read the control
 * hash too; limit = slots, periodMs = leaseMs; `15:`, `-15:` with capacity and cost):
 * its KEYS[i] is a sorted set of leases (see redis-lease-script.ts), taken only on commit
 * once every policy admits; overrides do not apply to it, an exemption takes no slot.
 *
 * Reply: each policy's state as it stood before this request, from which RedisStore
 * computes the reported numbers with the TypeScript reference, so the script does no
 * arithmetic it does not need for its own decision:
 * - token bucket and GCRA: the debt, in ticks of 1/L ms (an integer; with one such policy
 *   alone, the reply is that integer rather than an array);
 * - window algorithms: the stored value (or nil) and `now` in ms;
 * - concurrency limits: the leases held and the ms until the last one expires;
 * - then, only when a control hash applied to some policy, one string per policy: `x` when
 *   the identity is exempt (nothing spent, admitted), `L:P:C` for the limit, periodMs and
 *   capacity of an override in force, or '' for none (the hash's fields: see
 *   {@link CONTROL_LUA}). Under an override, every algorithm keeps its state in
 *   `<key>:o<untilMs>` (same slot), which expires no later than the override; token bucket
 *   and GCRA then keep their debt in the value, as on a test clock.
 *
 * Token bucket and GCRA are one debt (`C·P - scaledTokens` = `(TAT - now)·L`; see gcra.ts),
 * kept in the key's **expiry**: the key expires at the TAT rounded up to the ms, and its
 * value is the credit (ticks, < L) that the rounding added. So on the server clock a
 * decision is `PTTL` then `PEXPIRE`, or `SET ... PX` plus a `GET` of the credit when the
 * emission interval is not a whole number of ms: no `TIME`, no parsing. Redis >= 7 freezes
 * time for the whole script, so both calls see the same `now`. A test clock cannot move
 * an expiry, so with one the value holds `"<expiryMs>:<credit>"` instead. The window
 * algorithms read `TIME` (once per script, only when one is present) and keep their state
 * in the value.
 */
export const CONSUME_SCRIPT = `
-- Every call runs this whole chunk, so the path of one or two token bucket or GCRA policies
-- without controls, penalties or leases makes no table, closure or string it does not send
-- (bench/redis: instructions per call): ARGV numbers are read with \`+ 0\` (one strtod; tonumber
-- parses twice), numbers go to redis.call as '%d' strings (Redis would print them with
-- '%.17g'), a lone policy's debt is returned without a table, and the tables of two
-- policies are made at their size (each growth of a Lua table rehashes it).
local floor, ceil, fmt, argv, call = math.floor, math.ceil, string.format, ARGV, redis.call
local lease_read, lease_take
local takes, tn = nil, 0
local m = argv[1]
local commit, clock = m == 'c', nil
if not commit and m ~= 'd' then
  commit = string.byte(m) == 99
  clock = tonumber(string.sub(m, 2))
end
-- Penalties are written on commit, and in mode 'b' (a denial decided on Cluster).
local penal = commit or string.byte(m) == 98
local starts, z = nil, 0
local now = clock
local n = #KEYS
-- out: the reply, made only when it holds more than one lone policy's debt (single).
local out, single, r = nil, nil, 0
local writes, w = nil, 0
local ok = true
local ctls, effects = nil, nil
-- j: where the next policy's values start in ARGV.
local j = 2
for i = 1, n do
  local key = KEYS[i]
  local a = argv[j]
  local code = a == '4' and 4 or a == '3' and 3 or tonumber(a)
  local L, P, C, cost = argv[j + 1] + 0, argv[j + 2] + 0, nil, 1
  local v, ttl, keep, ou
  local blk, ext, rst, lifted, denies, lease
  if not code then
    -- A concurrency limit: '5:<leaseId>', or '-5:<leaseId>' to read the control hash too.
    local c
    c, lease = string.match(a, '^(-?1?5):(.+)$')
    code = tonumber(c)
  end
  if not code then
    -- A policy with a penalty: '<code>b<blockMs>', or 'B' when a refusal during the block
    -- starts it again; 'r' and 'R' alike, and the block's start deletes the policy's state.
    local c, e, b = string.match(a, '^(-?1?%d)([bBrR])(%d+)$')
    code, blk, ext, rst = tonumber(c), tonumber(b), e == 'B' or e == 'R', e == 'r' or e == 'R'
  end
  if code > 10 or code < -10 then
    code = code > 0 and code - 10 or code + 10
    C, cost = argv[j + 3] + 0, argv[j + 4] + 0
    j = j + 5
  else
    C = L
    j = j + 3
  end
  local spends = cost > 0
  ${CONTROL_LUA.trim().replace(/\n/g, '\n  ')}
  if code == 5 then
    if not now then
      local tm = redis.call('TIME')
      now = tm[1] * 1000 + floor(tm[2] / 1000)
    end
    if not lease_read then
      ${LEASE_LUA.trim().replace(/\n/g, '\n      ')}
    end
    local held, last = lease_read(key, now)
    out = out or {}
    out[r + 1], out[r + 2] = held, last > now and last - now or 0
    r = r + 2
    if held + cost > L then ok, denies = false, true
    elseif cost > 0 and commit then
      takes = takes or {}
      takes[tn + 1], takes[tn + 2], takes[tn + 3], takes[tn + 4] = key, lease, P, last
      tn = tn + 4
    end
  elseif code > 2 then
    local debt, tau = 0, C * P
    -- The debt goes in the value, as "<expiryMs>:<credit>", when the key's expiry cannot hold
    -- it: on a test clock, and under an override, whose state expires with the override.
    local at = clock or (ou and now)
    if at then
      local s = call('GET', key)
      local c = s and string.find(s, ':', 1, true)
      local e = c and tonumber(string.sub(s, 1, c - 1))
      if e and e >= at then debt = (e - at) * L - (tonumber(string.sub(s, c + 1)) or 0) end
    else
      local ms = call('PTTL', key)
      if ms >= 0 then
        debt = ms * L
        if P % L == 0 then
          keep = true
        else
          -- The credit is a whole number of ticks below L; anything else is not ours: 0.
          local credit = tonumber(call('GET', key))
          if credit and credit > 0 and credit < L and credit == floor(credit) then debt = debt - credit end
        end
      end
    end
    if debt < 0 then debt = 0 elseif debt > tau then debt = tau end
    r = r + 1
    if n == 1 then single = debt else
      out = out or { nil, nil, nil, nil }
      out[r] = debt
    end
    local need = cost * P
    if debt + need > tau then ok, denies = false, true
    elseif cost > 0 then
      debt = debt + need
      ttl = ceil(debt / L)
      v = ttl * L - debt
      if at then v = fmt('%d:%d', at + ttl, v) elseif v == 0 then v = '0' else v = fmt('%d', v) end
    end
  else
    local find, sub = string.find, string.sub
    if not now then
      local t = redis.call('TIME')
      now = t[1] * 1000 + floor(t[2] / 1000)
    end
    local s = call('GET', key)
    local admits
    if code == 1 then
      ${fixedWindow.lua!.trim().replace(/\n/g, '\n      ')}
      admits, v, ttl = fixed_window(s, now, L, P, cost)
    else
      ${slidingWindow.lua!.trim().replace(/\n/g, '\n      ')}
      admits, v, ttl = sliding_window(s, now, L, P, cost)
    end
    if not admits then ok, denies = false, true end
    out = out or {}
    out[r + 1], out[r + 2] = s, now
    r = r + 2
  end
  if blk then
    -- The policy's block, <policy key>:b (see penalty.ts): its expiry is the block's end,
    -- or on a test clock its value. Exemptions and overrides set it aside and lift it.
    local bk = KEYS[i] .. ':b'
    if lifted then
      if penal and spends then redis.call('DEL', bk) end
    else
      local left
      if clock then left = (tonumber(redis.call('GET', bk)) or 0) - clock
      else left = redis.call('PTTL', bk) end
      if left > 0 then
        ok, ttl = false, nil
        if ext and penal and spends then
          -- pcall: a store that cannot write (OOM, read-only) still refuses; the block
          -- just does not start again.
          redis.pcall('SET', bk, fmt('%d', (clock or 0) + blk), 'PX', fmt('%d', blk))
          left = blk
        end
        effects = effects or {}
        effects[i] = 'b' .. left
      elseif denies and spends then
        starts = starts or {}
        starts[z + 1], starts[z + 2], starts[z + 3] = bk, blk, rst and KEYS[i] or false
        z = z + 3
      end
    end
  end
  -- An override's state means nothing once it ends: it expires then, not a period later.
  if ou and ttl and ttl > ou - now then ttl = ou - now end
  if ttl and commit then
    -- One policy alone decides the request; with several, write only once all admit.
    if n == 1 then
      if keep then call('PEXPIRE', key, fmt('%d', ttl)) else call('SET', key, v, 'PX', fmt('%d', ttl)) end
    else
      writes = writes or { nil, nil, nil, nil, nil, nil, nil, nil }
      writes[w + 1], writes[w + 2], writes[w + 3], writes[w + 4] = key, v, ttl, keep or false
      w = w + 4
    end
  end
end
if starts and penal then
  -- pcall, as above: the refusal stands when the block cannot be written.
  for k = 1, z, 3 do
    redis.pcall('SET', starts[k], fmt('%d', (clock or 0) + starts[k + 1]), 'PX', fmt('%d', starts[k + 1]))
    if starts[k + 2] then redis.pcall('DEL', starts[k + 2]) end
  end
end
if ok and writes then
  for k = 1, w, 4 do
    if writes[k + 3] then call('PEXPIRE', writes[k], fmt('%d', writes[k + 2]))
    else call('SET', writes[k], writes[k + 1], 'PX', fmt('%d', writes[k + 2])) end
  end
end
if ok and takes then
  for k = 1, tn, 4 do lease_take(takes[k], now, takes[k + 1], takes[k + 2], takes[k + 3]) end
end
if effects then
  out = out or { single }
  for i = 1, n do out[r + i] = effects[i] or '' end
elseif single then
  return single
end
return out or {}
`;

/** SHA-1 of {@link CONSUME_SCRIPT}, as EVALSHA wants it. */
export const CONSUME_SHA = createHash('sha1').update(CONSUME_SCRIPT).digest('hex');
