/**
 * The Lua scripts behind RedisMetaStore.apply and the landing of staged snapshots (kvcm-meta
 * §9.4: `apply` is atomic with the `rev` conditions checked inside it). Redis runs a script
 * alone, so a batch is all-or-nothing as long as the script cannot fail halfway: every input
 * that could make it fail (a block key outside int64, an unknown op) is refused by the caller
 * before the script is sent, and the createLocationIf conditions are all checked before the
 * first write.
 *
 * ARGV[1] is the namespace prefix; then ONE argument per op (26k arguments for 2000 ops cost the
 * client more than the store work; one each costs a fraction): the op's fields joined by NUL,
 * its location id last, after the final NUL (an event-report id is built from a reporter's
 * medium and host, which §7.2/§7.4 do not keep free of NUL; every other field is a number, an
 * id, a storage name or JSON text, none of which holds one). Layouts (redis-layout.ts):
 *   P inst key sortable body | location_id                     put (insert rev 1, or replace with rev + 1)
 *   K inst key sortable status type create_time storage specs | location_id
 *                                                               put keeping a stored row's create_time
 *   G inst key sortable status type create_time storage n_put (name_json element_json)*n_put
 *     n_remove name_json*n_remove | location_id                merge specs (§7.5 ADD/DELETE; spec-merge.ts)
 *   H inst key sortable count | last_hit_us                    add hit statistics if the block has a location
 *   C inst key sortable body max_writable storage | location_id
 *                                                               insert if the §6 allocation condition holds
 *   S inst key sortable status expect | location_id            set status if rev = expect ('' = always)
 *   R inst key sortable specs expect | location_id             replace specs if rev = expect
 *   D inst key sortable expect | location_id                   delete location if rev = expect
 *   B inst key sortable |                                      delete the block (locations and properties)
 *   M inst key sortable | n k1 v1 … kn vn                      merge properties
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

/** Splits `s` at NUL: fields first..count into `f` (1-based), the rest of the text returned. */
const FIELDS = `
local function fields(s, f, count)
  local pos = 1
  for k = 1, count do
    local e = string.find(s, '\\0', pos, true)
    f[k] = string.sub(s, pos, e - 1)
    pos = e + 1
  end
  return string.sub(s, pos)
end
`;

export const APPLY_SCRIPT = `
local ns = ARGV[1]
local idx = ns .. 'locs'
local n = #ARGV
${PUT_KEEPING_CREATE_TIME}
${FIELDS}

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

-- §6 step 4 allocation condition of a C op (fields f, location id lid).
local function may_create(key, f, lid)
  local max = tonumber(f[6])
  local storage = f[7]
  local all = redis.call('HGETALL', key)
  local writable = 0
  for j = 1, #all, 2 do
    local field = all[j]
    if string.sub(field, 1, 2) == 'l:' then
      if string.sub(field, 3) == lid then return false end
      local status, typ, st = string.match(all[j + 1], '^%d+\\n(%d+)\\n(%d+)\\n%-?%d+\\n([^\\n]*)\\n')
      if typ ~= '7' and typ ~= '8' and (status == '2' or status == '3') then
        if st == storage then return false end
        writable = writable + 1
      end
    end
  end
  return writable < max
end

-- NUL-terminated fields of each op before its remainder (G and M parse their remainder themselves).
local known = { P = 5, K = 9, H = 5, C = 7, S = 6, R = 6, D = 5, B = 4 }
for i = 2, n do
  local op = string.sub(ARGV[i], 1, 1)
  if op == 'C' then
    local f = {}
    local lid = fields(ARGV[i], f, 7)
    if not may_create(ns .. 'b:' .. f[2] .. ':' .. f[3], f, lid) then return redis.error_reply('KVCM_CONFLICT ' .. (i - 2)) end
  elseif known[op] == nil and op ~= 'G' and op ~= 'M' then
    return redis.error_reply('kvcm apply: unknown op ' .. op)
  end
end

local out = {}
for i = 2, n do
  local s = ARGV[i]
  local op = string.sub(s, 1, 1)
  local f = {}
  local rest
  if op == 'G' or op == 'M' then rest = fields(s, f, 4) else rest = fields(s, f, known[op]) end
  local inst = f[2]
  local key = ns .. 'b:' .. inst .. ':' .. f[3]
  local base = inst .. '\\0' .. f[4] .. '\\0'
  if op == 'P' or op == 'C' then
    local lid, body = rest, f[5]
    local fl = 'l:' .. lid
    local cur = redis.call('HGET', key, fl)
    local rev = 1
    if cur then
      rev = tonumber(string.match(cur, '^(%d+)')) + 1
    else
      redis.call('ZADD', idx, 0, base .. lid)
    end
    redis.call('HSET', key, fl, rev .. '\\n' .. body)
    out[#out + 1] = rev
  elseif op == 'K' then
    out[#out + 1] = put_keeping_create_time(idx, key, base .. rest, rest, f[5], f[6], f[7], f[8], f[9])
  elseif op == 'G' then
    -- f: op inst key sortable | then status type ctime storage n_put … n_remove … | location id
    local g = {}
    local pos = 1
    local function nextf()
      local e = string.find(rest, '\\0', pos, true)
      local v = string.sub(rest, pos, e - 1)
      pos = e + 1
      return v
    end
    local status, typ, ctime, storage = nextf(), nextf(), nextf(), nextf()
    local np = tonumber(nextf())
    local pnames, pelems = {}, {}
    for j = 1, np do
      pnames[j] = nextf()
      pelems[j] = nextf()
    end
    local nr = tonumber(nextf())
    local removing = {}
    for j = 1, nr do removing[nextf()] = true end
    local lid = string.sub(rest, pos)
    local fl = 'l:' .. lid
    local cur = redis.call('HGET', key, fl)
    local res
    if not cur then
      if np == 0 then
        res = 0
      else
        redis.call('ZADD', idx, 0, base .. lid)
        redis.call('HSET', key, fl, '1\\n' .. status .. '\\n' .. typ .. '\\n' .. ctime .. '\\n' .. storage .. '\\n[' .. table.concat(pelems, ',') .. ']')
        res = 1
      end
      if nr > 0 then res = res .. ':' .. nr end
    else
      local rev = tonumber(string.match(cur, '^(%d+)'))
      local head, specs = string.match(cur, '^%d+\\n([^\\n]*\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*)\\n(.*)$')
      local put, used, found = {}, {}, 0
      for j = 1, np do put[pnames[j]] = j end
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
            if pelems[j] ~= elems[e] then changed = true end
            kept[#kept + 1] = pelems[j]
          end
        end
      end
      for j = 1, np do
        if not used[j] then
          kept[#kept + 1] = pelems[j]
          changed = true
        end
      end
      if not changed then
        res = rev
      elseif #kept == 0 then
        redis.call('HDEL', key, fl)
        redis.call('ZREM', idx, base .. lid)
        res = 0
      else
        res = rev + 1
        redis.call('HSET', key, fl, res .. '\\n' .. head .. '\\n[' .. table.concat(kept, ',') .. ']')
      end
      if nr - found > 0 then res = res .. ':' .. (nr - found) end
    end
    out[#out + 1] = res
  elseif op == 'H' then
    local has = false
    for _, fl in ipairs(redis.call('HKEYS', key)) do
      if string.sub(fl, 1, 2) == 'l:' then has = true break end
    end
    if has then
      local count = tonumber(redis.call('HGET', key, 'p:BP#hit_count') or '0') or 0
      redis.call('HSET', key, 'p:BP#hit_count', string.format('%d', count + tonumber(f[5])))
      local stored = redis.call('HGET', key, 'p:BP#lru_time')
      local us = rest
      if not (stored and string.match(stored, '^%d+$') and (#stored > #us or (#stored == #us and stored > us))) then
        redis.call('HSET', key, 'p:BP#lru_time', us)
      end
      out[#out + 1] = 0
    else
      out[#out + 1] = -1
    end
  elseif op == 'S' or op == 'R' then
    local fl = 'l:' .. rest
    local value = f[5]
    local expect = f[6]
    local cur = redis.call('HGET', key, fl)
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
        redis.call('HSET', key, fl, nv)
        res = rev + 1
      end
    end
    out[#out + 1] = res
  elseif op == 'D' then
    local expect = f[5]
    local cur = redis.call('HGET', key, 'l:' .. rest)
    local res = -1
    if cur and (expect == '' or tonumber(expect) == tonumber(string.match(cur, '^(%d+)'))) then
      redis.call('HDEL', key, 'l:' .. rest)
      redis.call('ZREM', idx, base .. rest)
      res = 0
    end
    out[#out + 1] = res
  elseif op == 'B' then
    for _, fl in ipairs(redis.call('HKEYS', key)) do
      if string.sub(fl, 1, 2) == 'l:' then redis.call('ZREM', idx, base .. string.sub(fl, 3)) end
    end
    redis.call('DEL', key)
    out[#out + 1] = 0
  elseif op == 'M' then
    -- rest: n k1 v1 … kn vn, NUL-separated (property names and values are ours: no NUL)
    local p = {}
    local pos = 1
    while true do
      local e = string.find(rest, '\\0', pos, true)
      if e == nil then p[#p + 1] = string.sub(rest, pos) break end
      p[#p + 1] = string.sub(rest, pos, e - 1)
      pos = e + 1
    end
    for j = 0, tonumber(p[1]) - 1 do
      redis.call('HSET', key, 'p:' .. p[2 + 2 * j], p[3 + 2 * j])
    end
    out[#out + 1] = 0
  end
end
return out
`;

/**
 * Lands up to ARGV[3] rows of the snapshot stage ARGV[2] (namespace ARGV[1]) in one step: each
 * row popped is written in the same script, so a stage is landed exactly once however many
 * replicas land it at the same time (offloaded-writes.ts: roll-forward). A row is
 * `inst\0key\0sortable\0status\0type\0create_time\0storage\0specs\0location_id`
 * (redis-layout.ts). Returns how many rows remain; the stage leaves the registry when none do.
 */
export const LAND_STAGE_SCRIPT = `
local ns = ARGV[1]
local id = ARGV[2]
local stage = ns .. 'stage:' .. id
local idx = ns .. 'locs'
${PUT_KEEPING_CREATE_TIME}
${FIELDS}
local rows = redis.call('LPOP', stage, tonumber(ARGV[3]))
if rows then
  for _, row in ipairs(rows) do
    local p = {}
    local lid = fields(row, p, 8)
    put_keeping_create_time(idx, ns .. 'b:' .. p[1] .. ':' .. p[2], p[1] .. '\\0' .. p[3] .. '\\0' .. lid, lid, p[4], p[5], p[6], p[7], p[8])
  end
end
local left = redis.call('LLEN', stage)
if left == 0 then redis.call('HDEL', ns .. 'stages', id) end
return left
`;
