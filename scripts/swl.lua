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

local function count_above(key, floor)
  return redis.call('ZCOUNT', key, '(' .. num(floor), '+inf')
end

-- Milliseconds until an entry at `score` leaves a window of `ms` at `now`.
local function ms_until_left(score, ms, now)
  local wait = math.ceil(score + ms - now)
  if wait ~= wait or wait <= 0 then return 0 end
  return wait
end

local function fits(count, cost, limit) return count + cost <= limit end

local function admits(key, windows, now, cost)
  for _, w in ipairs(windows) do
    if not fits(count_above(key, now - w.ms), cost, w.limit) then return false end
  end
  return true
end

-- -1 (waiting cannot help) outranks any wait; otherwise the longer wait.
local function waits_longer(retry, than)
  if than == -1 then return false end
  if retry == -1 then return true end
  return retry > than
end

-- The reply, read off the log as it stands after the call; `pending`
-- entries at `now` are counted as if recorded (SWL.PEEK of an admit).
local function verdict(key, windows, now, cost, allowed, pending)
  local binding
  for _, w in ipairs(windows) do
    local floor = now - w.ms
    local count = count_above(key, floor) + pending
    local reply = { allowed and 1 or 0, w.limit, math.max(0, w.limit - count), -1, 0 }
    if allowed then
      if not binding or reply[3] < binding[3] then binding = reply end
    elseif not fits(count, cost, w.limit) then
      if cost <= w.limit then
        -- The k-th oldest entry in the window must leave first.
        local k = count + cost - w.limit
        local entry = redis.call('ZRANGEBYSCORE', key, '(' .. num(floor), '+inf',
          'WITHSCORES', 'LIMIT', k - 1, 1)
        reply[4] = entry[2] and math.max(1, ms_until_left(tonumber(entry[2]), w.ms, now)) or 1
      end
      if not binding or waits_longer(reply[4], binding[4]) then binding = reply end
    end
  end
  if not binding then
    -- A denial that no window explains any more (a penalty cap shrank the
    -- log): the first window describes it, and the client may retry.
    local w = windows[1]
    local count = count_above(key, now - w.ms)
    binding = { allowed and 1 or 0, w.limit, math.max(0, w.limit - count), allowed and -1 or 1, 0 }
  end
  local wide = widest(windows)
  local newest = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(' .. num(now - wide.ms),
    'WITHSCORES', 'LIMIT', 0, 1)
  local newest_score = newest[2] and tonumber(newest[2])
  if pending > 0 and (not newest_score or now > newest_score) then newest_score = now end
  binding[5] = newest_score and ms_until_left(newest_score, wide.ms, now) or 0
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
  local allowed = admits(key, windows, now, cost)
  local recorded = allowed or request.penalize
  if recorded then record(key, now, cost, clock) end
  if not allowed and request.penalize then
    local excess = redis.call('ZCARD', key) - largest_limit(windows)
    if excess > 0 then redis.call('ZREMRANGEBYRANK', key, 0, excess - 1) end
  end
  local reply = verdict(key, windows, now, cost, allowed, 0)
  -- The key lives exactly as long as its newest entry stays in the window;
  -- a denial keeps an existing expiry but repairs a missing one. The time
  -- is the call's clock + reset_after_ms, set relative to the clock now:
  -- an absolute time that has just passed would delete the key at once
  -- (it lands 1 ms late only if a millisecond ticks between TIME and
  -- PEXPIRE). Redis propagates PEXPIRE as PEXPIREAT.
  if redis.call('EXISTS', key) == 1 and (recorded or redis.call('PTTL', key) == -1) then
    local at = clock_ms + reply[5]
    redis.call('PEXPIRE', key, num(math.max(1, at - server_clock())))
  end
  return reply
end

local function swl_peek(keys, args)
  local request, failed = prepare(keys, args, 'swl.peek')
  if not request then return failed end
  local now = request.now == '*' and server_clock() or request.now
  local allowed = admits(keys[1], request.windows, now, request.cost)
  return verdict(keys[1], request.windows, now, request.cost, allowed, allowed and request.cost or 0)
end

redis.register_function { function_name = 'swl_check', callback = swl_check }
redis.register_function { function_name = 'swl_peek', callback = swl_peek, flags = { 'no-writes' } }
