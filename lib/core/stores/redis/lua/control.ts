import { luaCodeIs } from './protocol.js';

/**
 * The part of CONSUME_SCRIPT that applies an identity's control hash to one policy (see
 * `controlKey`): pasted into its loop over the policies, for a policy whose algorithm code is
 * negative. It reads the hash once per identity (kept in `control_hashes`), then, while the
 * identity is exempt, sets `cost` to 0; otherwise, for a policy other than a concurrency
 * limit, the override in force replaces `limit`, `period_ms` and `capacity`, moves `key` to
 * the override's own state (`<key>:o<untilMs>`) and sets `override_until` to the override's
 * end. It records what applied in `effects[i]` and `control_applied`, reads `now` from
 * `TIME` if no clock has set it, and leaves `code` positive. Pasted rather than a Lua
 * function: it sets a dozen of the loop's locals, and a closure made per call would cost the
 * requests that have no control hash.
 *
 * An override field of the hash is `o:<scope|*>:<name|*>` =
 * `<untilMs>:<limit>:<periodMs>:<burst|0>`, the exemption `exempt` = `<untilMs>`, both on the
 * server clock; the most specific field in force wins.
 */
export const CONTROL_LUA = `
if code < 0 then
  code = -code
  -- The identity's control hash (overrides, exemption), read once per identity. It is
  -- not declared in KEYS: it shares the policy key's hash tag, hence its slot, and a
  -- declared key that rarely exists would turn every call during a Cluster slot
  -- migration into TRYAGAIN. While the slot migrates, the read may fail (pcall): the
  -- limits then apply without overrides for those seconds.
  local control_key = string.sub(key, 1, string.find(key, '}', 1, true)) .. ':ctl'
  control_hashes = control_hashes or {}
  local fields = control_hashes[control_key]
  if fields == nil then
    local raw = redis.pcall('HGETALL', control_key)
    fields = false
    if raw[1] then
      fields = {}
      for k = 1, #raw, 2 do fields[raw[k]] = raw[k + 1] end
    end
    control_hashes[control_key] = fields
  end
  if fields then
    if not now then
      local time = redis.call('TIME')
      now = time[1] * 1000 + floor(time[2] / 1000)
    end
    local effect = ''
    local exempt_until = fields.exempt and string.match(fields.exempt, '^%d+$') and tonumber(fields.exempt)
    if exempt_until and exempt_until > now and exempt_until <= 9007199254740991 then
      cost, effect = 0, 'x'
    elseif not (${luaCodeIs((form) => form.kind === 'leases')}) then
      -- The policy key is <prefix>:{<identity>}:<scope>:<name>:<tag>, the scope 'global'
      -- and the name 'default' written empty (see policyKey).
      local b = string.find(key, '}', 1, true)
      local s1 = string.find(key, ':', b + 2, true)
      local s2 = string.find(key, ':', s1 + 1, true)
      local scope, name = string.sub(key, b + 2, s1 - 1), string.sub(key, s1 + 1, s2 - 1)
      if scope == '' then scope = 'global' end
      if name == '' then name = 'default' end
      for _, field in ipairs({ scope .. ':' .. name, scope .. ':*', '*:' .. name, '*:*' }) do
        local override = fields['o:' .. field]
        local until_ms, o_limit, o_period, o_burst
        if override and #override <= 64 then
          until_ms, o_limit, o_period, o_burst = string.match(override, '^(%d+):(%d+):(%d+):(%d+)$')
        end
        if until_ms then
          until_ms, o_limit, o_period, o_burst = tonumber(until_ms), tonumber(o_limit), tonumber(o_period), tonumber(o_burst)
          -- A burst means something only to a debt (token bucket, GCRA).
          if o_burst == 0 or not (${luaCodeIs((form) => form.kind === 'debt')}) then o_burst = o_limit end
        end
        -- The same bounds as the TypeScript side (limit × period <= 2^50): a hand-written
        -- field outside them is ignored rather than misread.
        if until_ms and until_ms > now and until_ms <= 9007199254740991 and o_limit > 0 and o_period > 0
          and o_limit * o_period <= 1125899906842624 and o_burst * o_period <= 1125899906842624 then
          limit, period_ms, capacity = o_limit, o_period, o_burst
          effect = fmt('%d:%d:%d', limit, period_ms, capacity)
          -- State made at one rate means nothing at another (a debt in time, a window end or
          -- index): each override runs on state of its own, starting afresh.
          key = key .. ':o' .. fmt('%d', until_ms)
          override_until = until_ms
          break
        end
      end
    end
    effects = effects or {}
    effects[i] = effect
    control_applied = effect ~= ''
  end
end
`;
