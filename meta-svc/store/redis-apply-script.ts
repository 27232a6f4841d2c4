/**
 * The Lua script behind RedisMetaStore.apply (kvcm-meta §9.4: `apply` is atomic with the `rev`
 * conditions checked inside it). Redis runs a script alone, so the batch is all-or-nothing as
 * long as the script cannot fail halfway: every input that could make it fail (a block key
 * outside int64, an unknown op) is refused by the caller before the script is sent.
 *
 * ARGV[1] is the namespace prefix; then one tuple per op (layout in redis-layout.ts):
 *   P inst key sortable location_id body          put (insert rev 1, or replace with rev + 1)
 *   S inst key sortable location_id status expect set status if rev = expect ('' = always)
 *   R inst key sortable location_id specs expect  replace specs if rev = expect
 *   D inst key sortable location_id expect        delete location if rev = expect
 *   B inst key sortable                           delete the block (locations and properties)
 *   M inst key sortable n k1 v1 … kn vn           merge properties
 * Returns one integer per op: the new rev (> 0), 0 applied without a rev, -1 not applied.
 */
export const APPLY_SCRIPT = `
local ns = ARGV[1]
local idx = ns .. 'locs'
local out = {}
local i = 2
local n = #ARGV
while i <= n do
  local op = ARGV[i]
  local inst = ARGV[i + 1]
  local key = ns .. 'b:' .. inst .. ':' .. ARGV[i + 2]
  local base = inst .. '\\0' .. ARGV[i + 3] .. '\\0'
  if op == 'P' then
    local lid = ARGV[i + 4]
    local f = 'l:' .. lid
    local cur = redis.call('HGET', key, f)
    local rev = 1
    if cur then
      rev = tonumber(string.match(cur, '^(%d+)')) + 1
    else
      redis.call('ZADD', idx, 0, base .. lid)
    end
    redis.call('HSET', key, f, rev .. '\\n' .. ARGV[i + 5])
    out[#out + 1] = rev
    i = i + 6
  elseif op == 'S' or op == 'R' then
    local f = 'l:' .. ARGV[i + 4]
    local value = ARGV[i + 5]
    local expect = ARGV[i + 6]
    local cur = redis.call('HGET', key, f)
    local res = -1
    if cur then
      local rev = tonumber(string.match(cur, '^(%d+)'))
      if expect == '' or tonumber(expect) == rev then
        local nv
        if op == 'S' then
          nv = (rev + 1) .. '\\n' .. value .. '\\n' .. string.match(cur, '^%d+\\n%d+\\n(.*)$')
        else
          nv = (rev + 1) .. '\\n' .. string.match(cur, '^%d+\\n([^\\n]*\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*)\\n') .. '\\n' .. value
        end
        redis.call('HSET', key, f, nv)
        res = rev + 1
      end
    end
    out[#out + 1] = res
    i = i + 7
  elseif op == 'D' then
    local lid = ARGV[i + 4]
    local expect = ARGV[i + 5]
    local cur = redis.call('HGET', key, 'l:' .. lid)
    local res = -1
    if cur and (expect == '' or tonumber(expect) == tonumber(string.match(cur, '^(%d+)'))) then
      redis.call('HDEL', key, 'l:' .. lid)
      redis.call('ZREM', idx, base .. lid)
      res = 0
    end
    out[#out + 1] = res
    i = i + 6
  elseif op == 'B' then
    local fields = redis.call('HKEYS', key)
    for _, f in ipairs(fields) do
      if string.sub(f, 1, 2) == 'l:' then redis.call('ZREM', idx, base .. string.sub(f, 3)) end
    end
    redis.call('DEL', key)
    out[#out + 1] = 0
    i = i + 4
  elseif op == 'M' then
    local count = tonumber(ARGV[i + 4])
    for j = 0, count - 1 do
      redis.call('HSET', key, 'p:' .. ARGV[i + 5 + 2 * j], ARGV[i + 6 + 2 * j])
    end
    out[#out + 1] = 0
    i = i + 5 + 2 * count
  else
    return redis.error_reply('kvcm apply: unknown op ' .. tostring(op))
  end
end
return out
`;
