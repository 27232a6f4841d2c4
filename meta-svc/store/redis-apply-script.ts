/**
 * The Lua script behind RedisMetaStore.apply (kvcm-meta §9.4: `apply` is atomic with the `rev`
 * conditions checked inside it). Redis runs a script alone, so the batch is all-or-nothing as
 * long as the script cannot fail halfway: every input that could make it fail (a block key
 * outside int64, an unknown op) is refused by the caller before the script is sent, and the
 * createLocationIf conditions are all checked before the first write.
 *
 * ARGV[1] is the namespace prefix; then one tuple per op (layout in redis-layout.ts):
 *   P inst key sortable location_id body          put (insert rev 1, or replace with rev + 1)
 *   K inst key sortable location_id status type create_time storage specs
 *                                                 put keeping a stored row's create_time
 *   G inst key sortable location_id status type create_time storage
 *     n_put (name_json element_json)*n_put n_remove name_json*n_remove
 *                                                 merge specs (§7.5 ADD/DELETE; spec-merge.ts)
 *   H inst key sortable count last_hit_us         add hit statistics if the block has a location
 *   C inst key sortable location_id body max_writable storage
 *                                                 insert if the §6 allocation condition holds
 *   S inst key sortable location_id status expect set status if rev = expect ('' = always)
 *   R inst key sortable location_id specs expect  replace specs if rev = expect
 *   D inst key sortable location_id expect        delete location if rev = expect
 *   B inst key sortable                           delete the block (locations and properties)
 *   M inst key sortable n k1 v1 … kn vn           merge properties
 * Returns one entry per op: the new rev (> 0), 0 applied without a rev, -1 not applied; a merge
 * that named missing specs returns `"<rev>:<missing>"`. A createLocationIf whose condition fails
 * makes the whole script an error reply `KVCM_CONFLICT <op index>` before anything is written.
 *
 * Spec lists are JSON text `[[name,uri],…]` as `encodeSpecs` writes it; a merge never decodes
 * them: it splits the text into elements and compares each element's name literal with the
 * caller's `encodeSpecs`-encoded names (one encoding, so equal names are equal texts).
 */
/**
 * A location put keeping a stored row's create_time (§7.5 in place): apply's K op and the
 * landing of a staged snapshot row share it.
 */
const PUT_KEEPING_CREATE_TIME = `
local function put_keeping_create_time(idx, key, member, lid, status, typ, ctime, storage, specs)
  local f = 'l:' .. lid
  local cur = redis.call('HGET', key, f)
  local rev = 1
  if cur then
    local r, c = string.match(cur, '^(%d+)\\n%d+\\n%d+\\n(%-?%d+)\\n')
    rev, ctime = tonumber(r) + 1, c
  else
    redis.call('ZADD', idx, 0, member)
  end
  redis.call('HSET', key, f, rev .. '\\n' .. status .. '\\n' .. typ .. '\\n' .. ctime .. '\\n' .. storage .. '\\n' .. specs)
  return rev
end
`;

export const APPLY_SCRIPT = `
local ns = ARGV[1]
local idx = ns .. 'locs'
local n = #ARGV
${PUT_KEEPING_CREATE_TIME}

-- Where the op starting at ARGV[i] ends (the index of the next op).
local function next_op(i)
  local op = ARGV[i]
  if op == 'P' or op == 'D' then return i + 6 end
  if op == 'K' then return i + 10 end
  if op == 'S' or op == 'R' then return i + 7 end
  if op == 'B' then return i + 4 end
  if op == 'H' then return i + 6 end
  if op == 'C' then return i + 8 end
  if op == 'M' then return i + 5 + 2 * tonumber(ARGV[i + 4]) end
  if op == 'G' then
    local j = i + 9
    j = j + 1 + 2 * tonumber(ARGV[j])
    return j + 1 + tonumber(ARGV[j])
  end
  return nil
end

-- The elements of a stored spec list and the name literal of each.
local function split_specs(text)
  local elems, names = {}, {}
  local i, len = 2, #text
  while i < len do
    if string.byte(text, i) == 91 then -- '['
      local start, j, first = i, i + 1, nil
      for k = 1, 2 do
        local q = j
        j = j + 1
        while true do
          local p = string.find(text, '["\\\\]', j)
          if string.byte(text, p) == 92 then j = p + 2 else j = p + 1 break end
        end
        if k == 1 then first = string.sub(text, q, j - 1) end
        j = j + 1
      end
      elems[#elems + 1] = string.sub(text, start, j - 1)
      names[#names + 1] = first
      i = j
    else
      i = i + 1
    end
  end
  return elems, names
end

-- §6 step 4 allocation condition of a C op at ARGV[i].
local function may_create(key, i)
  local lid = ARGV[i + 4]
  local max = tonumber(ARGV[i + 6])
  local storage = ARGV[i + 7]
  local all = redis.call('HGETALL', key)
  local writable = 0
  for f = 1, #all, 2 do
    local field = all[f]
    if string.sub(field, 1, 2) == 'l:' then
      if string.sub(field, 3) == lid then return false end
      local status, typ, st = string.match(all[f + 1], '^%d+\\n(%d+)\\n(%d+)\\n%-?%d+\\n([^\\n]*)\\n')
      if typ ~= '7' and typ ~= '8' and (status == '2' or status == '3') then
        if st == storage then return false end
        writable = writable + 1
      end
    end
  end
  return writable < max
end

local k = 0
local i = 2
while i <= n do
  if ARGV[i] == 'C' and not may_create(ns .. 'b:' .. ARGV[i + 1] .. ':' .. ARGV[i + 2], i) then
    return redis.error_reply('KVCM_CONFLICT ' .. k)
  end
  local nxt = next_op(i)
  if nxt == nil then return redis.error_reply('kvcm apply: unknown op ' .. tostring(ARGV[i])) end
  i = nxt
  k = k + 1
end

local out = {}
i = 2
while i <= n do
  local op = ARGV[i]
  local inst = ARGV[i + 1]
  local key = ns .. 'b:' .. inst .. ':' .. ARGV[i + 2]
  local base = inst .. '\\0' .. ARGV[i + 3] .. '\\0'
  if op == 'P' or op == 'C' then
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
  elseif op == 'K' then
    local lid = ARGV[i + 4]
    out[#out + 1] = put_keeping_create_time(idx, key, base .. lid, lid, ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9])
  elseif op == 'G' then
    local lid = ARGV[i + 4]
    local f = 'l:' .. lid
    local np = tonumber(ARGV[i + 9])
    local rp = i + 10 + 2 * np
    local nr = tonumber(ARGV[rp])
    local cur = redis.call('HGET', key, f)
    local res
    if not cur then
      if np == 0 then
        res = 0
      else
        local parts = {}
        for j = 0, np - 1 do parts[#parts + 1] = ARGV[i + 11 + 2 * j] end
        redis.call('ZADD', idx, 0, base .. lid)
        redis.call('HSET', key, f, '1\\n' .. ARGV[i + 5] .. '\\n' .. ARGV[i + 6] .. '\\n' .. ARGV[i + 7] .. '\\n' .. ARGV[i + 8] .. '\\n[' .. table.concat(parts, ',') .. ']')
        res = 1
      end
      if nr > 0 then res = res .. ':' .. nr end
    else
      local rev = tonumber(string.match(cur, '^(%d+)'))
      local head, specs = string.match(cur, '^%d+\\n([^\\n]*\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*)\\n(.*)$')
      local put, used, removing, found = {}, {}, {}, 0
      for j = 0, np - 1 do put[ARGV[i + 10 + 2 * j]] = j end
      for j = 1, nr do removing[ARGV[rp + j]] = true end
      local elems, names = split_specs(specs)
      local kept, changed = {}, false
      for e = 1, #elems do
        local name = names[e]
        if removing[name] then
          found = found + 1
          changed = true
        else
          local j = put[name]
          if j == nil then
            kept[#kept + 1] = elems[e]
          else
            used[j] = true
            local elem = ARGV[i + 11 + 2 * j]
            if elem ~= elems[e] then changed = true end
            kept[#kept + 1] = elem
          end
        end
      end
      for j = 0, np - 1 do
        if not used[j] then
          kept[#kept + 1] = ARGV[i + 11 + 2 * j]
          changed = true
        end
      end
      if not changed then
        res = rev
      elseif #kept == 0 then
        redis.call('HDEL', key, f)
        redis.call('ZREM', idx, base .. lid)
        res = 0
      else
        res = rev + 1
        redis.call('HSET', key, f, res .. '\\n' .. head .. '\\n[' .. table.concat(kept, ',') .. ']')
      end
      if nr - found > 0 then res = res .. ':' .. (nr - found) end
    end
    out[#out + 1] = res
  elseif op == 'H' then
    local fields = redis.call('HKEYS', key)
    local has = false
    for _, f in ipairs(fields) do
      if string.sub(f, 1, 2) == 'l:' then has = true break end
    end
    if has then
      local count = tonumber(redis.call('HGET', key, 'p:BP#hit_count') or '0') or 0
      redis.call('HSET', key, 'p:BP#hit_count', string.format('%d', count + tonumber(ARGV[i + 4])))
      local stored = redis.call('HGET', key, 'p:BP#lru_time')
      local us = ARGV[i + 5]
      if not (stored and string.match(stored, '^%d+$') and (#stored > #us or (#stored == #us and stored > us))) then
        redis.call('HSET', key, 'p:BP#lru_time', us)
      end
      out[#out + 1] = 0
    else
      out[#out + 1] = -1
    end
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
  elseif op == 'B' then
    local fields = redis.call('HKEYS', key)
    for _, f in ipairs(fields) do
      if string.sub(f, 1, 2) == 'l:' then redis.call('ZREM', idx, base .. string.sub(f, 3)) end
    end
    redis.call('DEL', key)
    out[#out + 1] = 0
  elseif op == 'M' then
    local count = tonumber(ARGV[i + 4])
    for j = 0, count - 1 do
      redis.call('HSET', key, 'p:' .. ARGV[i + 5 + 2 * j], ARGV[i + 6 + 2 * j])
    end
    out[#out + 1] = 0
  end
  i = next_op(i)
end
return out
`;

/**
 * Lands up to ARGV[3] rows of the snapshot stage ARGV[2] (namespace ARGV[1]) in one step: each
 * row popped is written in the same script, so a stage is landed exactly once however many
 * replicas land it at the same time (offloaded-writes.ts: roll-forward). A row is
 * `inst\0key\0sortable\0location_id\0status\0type\0create_time\0storage\0specs`
 * (redis-layout.ts). Returns how many rows remain; the stage leaves the registry when none do.
 */
export const LAND_STAGE_SCRIPT = `
local ns = ARGV[1]
local id = ARGV[2]
local stage = ns .. 'stage:' .. id
local idx = ns .. 'locs'
${PUT_KEEPING_CREATE_TIME}
local rows = redis.call('LPOP', stage, tonumber(ARGV[3]))
if rows then
  for _, row in ipairs(rows) do
    local p, s = {}, 1
    for k = 1, 8 do
      local e = string.find(row, '\\0', s, true)
      p[k] = string.sub(row, s, e - 1)
      s = e + 1
    end
    put_keeping_create_time(idx, ns .. 'b:' .. p[1] .. ':' .. p[2], p[1] .. '\\0' .. p[3] .. '\\0' .. p[4], p[4], p[5], p[6], p[7], p[8], string.sub(row, s))
  end
end
local left = redis.call('LLEN', stage)
if left == 0 then redis.call('HDEL', ns .. 'stages', id) end
return left
`;
