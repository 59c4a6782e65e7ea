#!lua name=swl
--[[
redis-swl without the module: a Redis Functions library (Redis 7+) with the
same arguments, replies, errors and key contents as SWL.CHECK and SWL.PEEK,
for servers that cannot load modules.

  redis-cli FUNCTION LOAD REPLACE "$(cat scripts/swl.lua)"
  FCALL swl_check 1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [PENALIZE]
  FCALL swl_peek  1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...

Only the members of the entries differ from the module's (both are random
14-digit numbers). It is slower: see "Choosing" in the README.
]]

local MAX_MS = 9007199254740991
local MAX_COST = 100000
-- The wait for an entry that never leaves its window (2^54, exact as a double).
local NEVER_MS = 18014398509481984

local ERR_WINDOW = 'ERR window_ms must be an integer from 1 to 9007199254740991'
local ERR_LIMIT = 'ERR limit must be an integer from 0 to 9007199254740991'
local ERR_NOW = 'ERR now_ms must be an integer from 0 to 9007199254740991, or *'
local ERR_COST = 'ERR cost must be an integer from 1 to 100000'
local ERR_SYNTAX = 'ERR syntax error'
local ERR_WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- A plain decimal integer within min..max: digits only, no sign, spaces or
-- leading zeros. Longer than 16 digits is out of range anyway.
local function parse_int(text, min, max)
  if #text == 0 or #text > 16 then return nil end
  if text ~= '0' and not string.match(text, '^[1-9][0-9]*$') then return nil end
  local value = tonumber(text)
  if value < min or value > max then return nil end
  return value
end

local function parse_window(window_ms, limit)
  local w = parse_int(window_ms, 1, MAX_MS)
  if not w then return nil, ERR_WINDOW end
  local l = parse_int(limit, 0, MAX_MS)
  if not l then return nil, ERR_LIMIT end
  return { ms = w, limit = l }
end

local function parse(args, command)
  if #args < 3 then
    return nil, "ERR wrong number of arguments for '" .. command .. "' command"
  end
  local first, err = parse_window(args[1], args[2])
  if not first then return nil, err end
  local request = { windows = { first }, cost = 1, penalize = false }
  if args[3] == '*' then
    request.now = '*'
  else
    request.now = parse_int(args[3], 0, MAX_MS)
    if not request.now then return nil, ERR_NOW end
  end
  local cost_seen = false
  local i = 4
  while i <= #args do
    local option = string.upper(args[i])
    if option == 'COST' and not cost_seen then
      if i + 1 > #args then return nil, ERR_SYNTAX end
      request.cost = parse_int(args[i + 1], 1, MAX_COST)
      if not request.cost then return nil, ERR_COST end
      cost_seen = true
      i = i + 2
    elseif option == 'WINDOW' then
      if i + 2 > #args then return nil, ERR_SYNTAX end
      local window
      window, err = parse_window(args[i + 1], args[i + 2])
      if not window then return nil, err end
      request.windows[#request.windows + 1] = window
      i = i + 3
    elseif option == 'PENALIZE' and command == 'swl.check' and not request.penalize then
      request.penalize = true
      i = i + 1
    else
      return nil, ERR_SYNTAX
    end
  end
  return request
end

-- Exact for every integer a score holds.
local function num(x) return string.format('%.0f', x) end

local function widest(windows)
  local best = windows[1]
  for _, w in ipairs(windows) do
    if w.ms > best.ms then best = w end
  end
  return best
end

local function largest_limit(windows)
  local largest = 0
  for _, w in ipairs(windows) do
    if w.limit > largest then largest = w.limit end
  end
  return largest
end

-- Each window's entries above its floor: ZCOUNT is O(log N).
local function counts(key, windows, now)
  local result = {}
  for i, w in ipairs(windows) do
    result[i] = redis.call('ZCOUNT', key, '(' .. num(now - w.ms), '+inf')
  end
  return result
end

local function admits(windows, counts, cost)
  for i, w in ipairs(windows) do
    if counts[i] + cost > w.limit then return false end
  end
  return true
end

-- Each window's count after `recorded` entries at now (inside every window)
-- and, with a cap, after only the newest `cap` entries were kept.
local function counts_after(counts, recorded, cap)
  local result = {}
  for i, count in ipairs(counts) do
    local n = count + recorded
    if cap and n > cap then n = cap end
    result[i] = n
  end
  return result
end

-- The score at `rank`, 0 the oldest: ZRANGE by rank is O(log N).
local function score_at(key, rank)
  if rank < 0 then return nil end
  local entry = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  return entry[2] and tonumber(entry[2])
end

-- Milliseconds until an entry at `score` leaves a window of `ms` at `now`:
-- ceil(score) + ms - now, exact while it stays within 2^53 (past that a
-- double rounds it, where the module is exact), NEVER_MS for an entry that
-- never leaves (+inf written by another tool).
local function ms_until_left(score, ms, now)
  local wait = (math.ceil(score) - now) + ms
  if wait ~= wait or wait <= 0 then return 0 end
  if wait > NEVER_MS then return NEVER_MS end
  return wait
end

-- When `cost` more units fit: once the (limit - cost + 1)-th newest entry
-- leaves the window.
local function retry_after(key, len, w, now, cost)
  if cost > w.limit then return -1 end
  local score = score_at(key, len - (w.limit - cost + 1))
  if not score then return 1 end
  return math.max(1, ms_until_left(score, w.ms, now))
end

-- -1 (waiting cannot help) outranks any wait; otherwise the longer wait.
local function waits_longer(retry, than)
  if than == -1 then return false end
  if retry == -1 then return true end
  return retry > than
end

-- The reply, from each window's count after the call and the log as it
-- stands; `pending` counts `cost` entries at `now` as recorded without
-- their being in the log (SWL.PEEK of an admit).
local function verdict(key, windows, counts, now, cost, allowed, pending)
  local len = redis.call('ZCARD', key)
  local binding
  for i, w in ipairs(windows) do
    local count = counts[i]
    local reply = { allowed and 1 or 0, w.limit, math.max(0, w.limit - count), -1, 0, w.ms }
    if allowed then
      if not binding or reply[3] < binding[3] then binding = reply end
    elseif count + cost > w.limit then
      reply[4] = retry_after(key, len, w, now, cost)
      if not binding or waits_longer(reply[4], binding[4]) then binding = reply end
    end
  end
  if not binding then
    -- A denial that no window explains any more (a penalty cap shrank the
    -- log): the first window describes it, and the client may retry.
    local w = windows[1]
    binding = { allowed and 1 or 0, w.limit, math.max(0, w.limit - counts[1]), allowed and -1 or 1, 0, w.ms }
  end
  local wide = widest(windows)
  local newest = score_at(key, len - 1)
  if newest and not (newest > now - wide.ms) then newest = nil end
  if pending and not (newest and newest > now) then newest = now end
  binding[5] = newest and ms_until_left(newest, wide.ms, now) or 0
  return binding
end

-- Random-looking 14-digit members from the clock, unique within the key:
-- ZADD NX moves on to the next number on a clash.
local function record(key, now, count, clock)
  local member = 10000000000000 + ((clock[1] % 90000) * 1000000 + clock[2]) * 1000
  for _ = 1, count do
    while redis.call('ZADD', key, 'NX', num(now), num(member)) == 0 do
      member = member + 1
    end
    member = member + 1
  end
end

-- The request, or an error reply: arguments first, then the key's type.
local function prepare(keys, args, command)
  local request, err = parse(args, command)
  if not request then return nil, redis.error_reply(err) end
  if #keys ~= 1 then return nil, redis.error_reply('ERR the function takes exactly one key') end
  local kind = redis.call('TYPE', keys[1])['ok']
  if kind ~= 'zset' and kind ~= 'none' then return nil, redis.error_reply(ERR_WRONGTYPE) end
  return request
end

local function server_clock()
  local t = redis.call('TIME')
  local seconds, micros = tonumber(t[1]), tonumber(t[2])
  return seconds * 1000 + math.floor(micros / 1000), { seconds, micros }
end

local function swl_check(keys, args)
  local request, failed = prepare(keys, args, 'swl.check')
  if not request then return failed end
  local key = keys[1]
  local clock_ms, clock = server_clock()
  local now = request.now == '*' and clock_ms or request.now
  local windows, cost = request.windows, request.cost

  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now - widest(windows).ms))
  local before = counts(key, windows, now)
  local allowed = admits(windows, before, cost)
  local recorded, cap = 0, nil
  if allowed then
    recorded = cost
  elseif request.penalize then
    -- Record no more than the cap keeps; entries after now outrank them.
    cap = largest_limit(windows)
    local newer = redis.call('ZCOUNT', key, '(' .. num(now), '+inf')
    recorded = math.min(cost, math.max(0, cap - newer))
  end
  if recorded > 0 then record(key, now, recorded, clock) end
  if cap then
    local excess = redis.call('ZCARD', key) - cap
    if excess > 0 then redis.call('ZREMRANGEBYRANK', key, 0, excess - 1) end
  end
  local reply = verdict(key, windows, counts_after(before, recorded, cap), now, cost, allowed, false)
  -- The key lives at least until its newest entry leaves the window: the
  -- call's clock + reset_after_ms. An admit sets that; a denial only
  -- lengthens a shorter expiry (or repairs a missing one). It is set
  -- relative to the clock now: an absolute time that has just passed would
  -- delete the key at once (it lands 1 ms late only if a millisecond ticks
  -- between TIME and PEXPIRE). Redis propagates PEXPIRE as PEXPIREAT.
  if redis.call('EXISTS', key) == 1 then
    local current = redis.call('PEXPIRETIME', key)
    if allowed or current == -1 or current < clock_ms + reply[5] then
      local ttl = reply[5] - (server_clock() - clock_ms)
      redis.call('PEXPIRE', key, num(math.max(1, ttl)))
    end
  end
  return reply
end

local function swl_peek(keys, args)
  local request, failed = prepare(keys, args, 'swl.peek')
  if not request then return failed end
  local key, windows, cost = keys[1], request.windows, request.cost
  local now = request.now == '*' and server_clock() or request.now
  local before = counts(key, windows, now)
  local allowed = admits(windows, before, cost)
  local after = counts_after(before, allowed and cost or 0, nil)
  return verdict(key, windows, after, now, cost, allowed, allowed)
end

redis.register_function { function_name = 'swl_check', callback = swl_check }
redis.register_function { function_name = 'swl_peek', callback = swl_peek, flags = { 'no-writes' } }
