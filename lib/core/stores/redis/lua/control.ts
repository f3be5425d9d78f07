/**
 * The part of CONSUME_SCRIPT that applies an identity's control hash to one policy (see
 * `controlKey`): pasted into its loop over the policies, for a policy whose algorithm code is
 * negative. It reads the hash once per identity (kept in `ctls`), then, while the identity
 * is exempt, sets `cost` to 0; otherwise, for a policy other than a concurrency limit, the
 * override in force replaces `L`, `P` and `C`, moves `key` to the override's own state
 * (`<key>:o<untilMs>`) and sets `ou` to the override's end. It records what applied in
 * `effects[i]` and `lifted`, reads `now` from `TIME` if no clock has set it, and leaves `code`
 * positive. Pasted rather than a Lua function: it sets a dozen of the loop's locals, and a
 * closure made per call would cost the requests that have no control hash.
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
  local ck = string.sub(key, 1, string.find(key, '}', 1, true)) .. ':ctl'
  ctls = ctls or {}
  local f = ctls[ck]
  if f == nil then
    local raw = redis.pcall('HGETALL', ck)
    f = false
    if raw[1] then
      f = {}
      for k = 1, #raw, 2 do f[raw[k]] = raw[k + 1] end
    end
    ctls[ck] = f
  end
  if f then
    if not now then
      local t = redis.call('TIME')
      now = t[1] * 1000 + floor(t[2] / 1000)
    end
    local effect = ''
    local e = f.exempt and string.match(f.exempt, '^%d+$') and tonumber(f.exempt)
    if e and e > now and e <= 9007199254740991 then
      cost, effect = 0, 'x'
    elseif code ~= 5 then
      local b = string.find(key, '}', 1, true)
      local s1 = string.find(key, ':', b + 2, true)
      local s2 = string.find(key, ':', s1 + 1, true)
      local scope, name = string.sub(key, b + 2, s1 - 1), string.sub(key, s1 + 1, s2 - 1)
      for _, field in ipairs({ scope .. ':' .. name, scope .. ':*', '*:' .. name, '*:*' }) do
        local o = f['o:' .. field]
        local u, ol, op, ob
        if o and #o <= 64 then u, ol, op, ob = string.match(o, '^(%d+):(%d+):(%d+):(%d+)$') end
        if u then
          u, ol, op, ob = tonumber(u), tonumber(ol), tonumber(op), tonumber(ob)
          if ob == 0 or code < 3 then ob = ol end
        end
        -- The same bounds as the TypeScript side (limit × period <= 2^50): a hand-written
        -- field outside them is ignored rather than misread.
        if u and u > now and u <= 9007199254740991 and ol > 0 and op > 0 and ol * op <= 1125899906842624
          and ob * op <= 1125899906842624 then
          L, P, C = ol, op, ob
          effect = fmt('%d:%d:%d', L, P, C)
          -- State made at one rate means nothing at another (a debt in time, a window end or
          -- index): each override runs on state of its own, starting afresh.
          key = key .. ':o' .. fmt('%d', u)
          ou = u
          break
        end
      end
    end
    effects = effects or {}
    effects[i] = effect
    lifted = effect ~= ''
  end
end
`;
