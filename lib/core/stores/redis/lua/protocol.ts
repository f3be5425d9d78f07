import { ALGORITHM_IMPLS } from '../../../algorithms/index.js';
import type { AlgorithmImpl, LuaForm, PolicyAlgorithm } from '../../../algorithms/types.js';
import { owedTicks } from '../../../model/refund.js';
import type { StorePolicy, StoreRefund } from '../../store.js';

// How RedisStore and its consume and refund scripts speak: the algorithm codes, the marks a
// policy's code carries, the modes. RedisStore's encoder below and the scripts' Lua both read
// this module; the Lua gets its values pasted in when the module loads, so each script is still
// one constant text with one SHA.

/**
 * Each algorithm's code in the scripts' ARGV. A script runs an algorithm only on its own code
 * (`code == 4`, never a range), and answers a code it does not know with an error reply.
 * A code is one digit, 1 to 9 (below {@link WITH_CAPACITY_AND_COST}), and none is shared.
 *
 * A new algorithm: its file in `core/algorithms/` (TypeScript and Lua), its row in
 * `ALGORITHM_IMPLS` (`core/algorithms/index.ts`) and its code here; the compiler asks for
 * both rows once its name is in `Algorithm`.
 */
export const ALGORITHM_CODES: Readonly<Record<PolicyAlgorithm, number>> = {
  'fixed-window': 1,
  'sliding-window': 2,
  'token-bucket': 3,
  gcra: 4,
  concurrency: 5,
  'sliding-log': 6,
  // The next algorithm takes 7.
};

/**
 * Added to a policy's code when its capacity and cost follow its limit and period (codes 11
 * to 19). Without them capacity is the limit and cost is 1, the common case, which so sends
 * two values fewer (6% of a GCRA decision's instructions in Redis).
 */
export const WITH_CAPACITY_AND_COST = 10;

/** Between a concurrency limit's code and the id of the lease it takes: `5:<leaseId>`. */
export const LEASE_SEPARATOR = ':';

/**
 * A penalty's letter between a policy's code and its block in ms, `<code>b<blockMs>`, at
 * index `1 × extendBlock + 2 × blockResets` (see `penalty.ts`): `B` restarts the block on a
 * refusal during it, `r` deletes the policy's state when the block starts, `R` both.
 */
export const BLOCK_LETTERS = ['b', 'B', 'r', 'R'] as const;

/**
 * The consume script's mode, ARGV[1]: `c` decides and commits an admitted request, `d` only
 * decides (writes nothing), `b` decides and writes only penalties (a denial decided on
 * Cluster), `m` commits as `c` does but takes no lone path, and replies last, for each
 * fixed-window policy in KEYS order, its window's end in ms once written (the mark of a
 * request that may be refunded: see {@link WINDOW_END_LUA}; a sliding window's mark, its
 * index, is in the value the general reply holds). Tests append their clock in ms: `c<now>`.
 */
export const MODES = { commit: 'c', decide: 'd', penalties: 'b', marked: 'm' } as const;

/**
 * How far, in ms, a fixed window's end may be from a refund's mark and still be that window,
 * on a Redis without `PEXPIRETIME` (before 7.0), where both are read as the server's `TIME`
 * plus the key's `PTTL`: each reading may be off by a ms. With `PEXPIRETIME` they are equal.
 */
export const FIXED_WINDOW_MARK_SLACK_MS = 2;

/**
 * Lua: `window_end(key)`, the ms since the epoch at which `key` expires on the server clock,
 * and whether that is exact: `PEXPIRETIME` (Redis >= 7.0), else the server's `TIME` plus the
 * key's `PTTL` (to {@link FIXED_WINDOW_MARK_SLACK_MS}); -1 for a key without an expiry or
 * none. A fixed window's end is its key's expiry, which tells its windows apart: one opened
 * since (after the key expired, a reset, or a penalty that forgot the state) ends elsewhere.
 */
export const WINDOW_END_LUA = `
local function window_end(key)
  local at = redis.pcall('PEXPIRETIME', key)
  if type(at) == 'number' then return at, true end
  local time, left = redis.call('TIME'), redis.call('PTTL', key)
  if left <= 0 then return -1, false end
  return time[1] * 1000 + math.floor(time[2] / 1000) + left, false
end`;
export type Mode = (typeof MODES)[keyof typeof MODES];

/**
 * The consume script's mode for committing `policies`: {@link MODES.marked} when the caller may
 * refund a fixed window among them (its mark is its end on the server clock) or a sliding
 * window or log (their marks are in their values, which the lone path does not reply), else
 * {@link MODES.commit}.
 */
export function commitMode(policies: readonly StorePolicy[]): Mode {
  return policies.some((p) => p.refundable && ALGORITHM_IMPLS[p.algorithm].lua.kind !== 'debt')
    ? MODES.marked
    : MODES.commit;
}

/**
 * Appends one policy's ARGV entries for the consume script: its code (as a string with a
 * lease id or a penalty; negated when the script must read the identity's control hash; plus
 * {@link WITH_CAPACITY_AND_COST} when capacity and cost follow), its limit and periodMs.
 */
export function pushPolicy(
  args: (string | number)[],
  p: StorePolicy,
  readsControls: boolean,
): void {
  const full = p.capacity !== p.limit || p.cost !== 1;
  let code = ALGORITHM_CODES[p.algorithm] + (full ? WITH_CAPACITY_AND_COST : 0);
  if (readsControls) code = -code;
  args.push(
    p.lease !== undefined
      ? `${code}${LEASE_SEPARATOR}${p.lease}`
      : p.blockMs === undefined
        ? code
        : `${code}${BLOCK_LETTERS[(p.extendBlock ? 1 : 0) + (p.blockResets ? 2 : 0)]}${p.blockMs}`,
    p.limit,
    p.periodMs,
  );
  if (full) args.push(p.capacity, p.cost);
}

/**
 * Appends one policy's ARGV entries for the refund script (code, limit, periodMs, amount,
 * mark), unless it has nothing to give back.
 * @param now the store's test clock in ms, if any
 * @returns whether it appended
 */
export function pushRefund(
  args: (string | number)[],
  r: StoreRefund,
  now: number | undefined,
): boolean {
  // A debt gives back what is still owed, in ticks (see owedTicks); a value its cost.
  const debt = ALGORITHM_IMPLS[r.algorithm].lua.kind === 'debt';
  const amount = debt ? owedTicks(r, now ?? Date.now()) : r.cost;
  if (amount === 0) return false;
  args.push(ALGORITHM_CODES[r.algorithm], r.limit, r.periodMs, amount, r.mark);
  return true;
}

const IMPLS = Object.entries(ALGORITHM_IMPLS) as [PolicyAlgorithm, AlgorithmImpl][];

/** Lua: whether `code` is the code of an algorithm `which` picks (`code == 3 or code == 4`). */
export function luaCodeIs(which: (form: LuaForm) => boolean): string {
  const codes = IMPLS.filter(([, impl]) => which(impl.lua)).map(([name]) => ALGORITHM_CODES[name]);
  return codes.length === 0 ? 'false' : codes.map((c) => `code == ${c}`).join(' or ');
}

/**
 * The order of the branches, each one comparison more than the one before (about 0.1% of a
 * decision each, counted with callgrind): debts first (one comparison for token bucket, the
 * default, two for GCRA), then the fixed window, then leases, then the sliding windows, whose
 * own work (`TIME`, parsing) outweighs a comparison most.
 */
const KIND_ORDER: readonly LuaForm['kind'][] = ['debt', 'counter', 'leases', 'value'];

/**
 * Lua: `if code == ... then <branch> elseif ... else <error reply> end`, run once per
 * policy. The branch of each algorithm is `branchOf(form)` (undefined: none, so its code
 * is an error reply too); algorithms whose branches are the same text share one (token
 * bucket and GCRA), in {@link KIND_ORDER}.
 * @param indent put before every line but the first
 */
export function luaDispatch(
  branchOf: (form: LuaForm) => string | undefined,
  indent: string,
): string {
  const branches = new Map<string, number[]>();
  const ordered = [...IMPLS].sort(
    ([, a], [, b]) => KIND_ORDER.indexOf(a.lua.kind) - KIND_ORDER.indexOf(b.lua.kind),
  );
  for (const [name, impl] of ordered) {
    const text = branchOf(impl.lua);
    if (text === undefined) continue;
    const codes = branches.get(text) ?? branches.set(text, []).get(text)!;
    codes.push(ALGORITHM_CODES[name]);
  }
  const pad = (text: string) => text.trim().replace(/\n/g, `\n${indent}  `);
  const parts = [...branches].map(
    ([text, codes], k) =>
      `${k === 0 ? 'if' : 'elseif'} ${codes.map((c) => `code == ${c}`).join(' or ')} then\n${indent}  ${pad(text)}`,
  );
  return `${parts.join(`\n${indent}`)}
${indent}else
${indent}  return redis.error_reply(fmt('no algorithm has code %s', tostring(code)))
${indent}end`;
}

/**
 * Lua: reads one policy's code (see {@link pushPolicy}) from `argv[arg]`, and its numbers
 * after it, into the locals `code` (still negated when the control hash must be read),
 * `limit`, `period_ms`, `capacity`, `cost`, `lease_id`, `block_ms`, `block_extends` and
 * `block_resets`; moves `arg` to the next policy. A code it cannot read is an error reply.
 */
export const PARSE_POLICY_LUA = `
local encoded = argv[arg]
-- ARGV numbers are read with \`+ 0\` (one strtod; tonumber parses twice), and the codes
-- whose algorithms read no clock are compared as strings first (tonumber is 3% of a fixed
-- window's decision).
local code = encoded == '${ALGORITHM_CODES.gcra}' and ${ALGORITHM_CODES.gcra}
  or encoded == '${ALGORITHM_CODES['token-bucket']}' and ${ALGORITHM_CODES['token-bucket']}
  or encoded == '${ALGORITHM_CODES['fixed-window']}' and ${ALGORITHM_CODES['fixed-window']} or tonumber(encoded)
local limit, period_ms, capacity, cost = argv[arg + 1] + 0, argv[arg + 2] + 0, nil, 1
local lease_id, block_ms, block_extends, block_resets
if not code then
  -- '<code>${LEASE_SEPARATOR}<leaseId>': a concurrency limit and the lease it takes.
  local digits, rest = string.match(encoded, '^(-?%d+)${LEASE_SEPARATOR}(.+)$')
  if digits then
    lease_id = rest
  else
    -- '<code><letter><blockMs>': a penalty (letters: ${BLOCK_LETTERS.join(' ')}).
    local letter
    digits, letter, rest = string.match(encoded, '^(-?%d+)([${BLOCK_LETTERS.join('')}])(%d+)$')
    block_ms = tonumber(rest)
    block_extends = ${luaLetterHas(1)}
    block_resets = ${luaLetterHas(2)}
  end
  code = tonumber(digits)
  if not code then return redis.error_reply(fmt('bad policy code %q', encoded)) end
end
if code > ${WITH_CAPACITY_AND_COST} or code < -${WITH_CAPACITY_AND_COST} then
  code = code > 0 and code - ${WITH_CAPACITY_AND_COST} or code + ${WITH_CAPACITY_AND_COST}
  capacity, cost = argv[arg + 3] + 0, argv[arg + 4] + 0
  arg = arg + 5
else
  capacity = limit
  arg = arg + 3
end
`;

/** Lua: whether `letter` is one of the {@link BLOCK_LETTERS} with `bit` set in its index. */
function luaLetterHas(bit: number): string {
  return BLOCK_LETTERS.filter((_, i) => (i & bit) !== 0)
    .map((l) => `letter == '${l}'`)
    .join(' or ');
}
