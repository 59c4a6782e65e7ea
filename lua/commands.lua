-- SWL.CHECK, SWL.PEEK, SWL.REFUND and SWL.ENTRIES: parse, open, decide,
-- apply, reply, as src/commands.rs; each call's clock and the release of
-- what it read.

local integer_of, parse_window, parse = request.integer_of, request.parse_window, request.parse
local counts, add_recorded, verdict = window.counts, window.add_recorded, window.verdict
local ms_until_left = window.ms_until_left
local zset_log, compact_log = zset.log, compact.log

-- The server's clock in milliseconds, and its seconds and microseconds.
local function server_clock()
  local t = redis_call('TIME')
  local seconds, micros = t[1] + 0, t[2] + 0
  return seconds * 1000 + (micros - micros % 1000) / 1000, seconds, micros
end

-- The first member a call at the clock's `seconds` and `micros` would add
-- to a sorted set (see add_members).
local function first_member_at(seconds, micros)
  return 10000000000000 + ((seconds % 90000) * 1000000 + micros) * 1000
end

-- The log in `key`: a sorted set, a compact log, or (no key) as ENCODING
-- says; or an error reply. A call that trims to `floor` first asks the
-- key with the command it needs anyway for new logs' encoding: a sorted
-- set is trimmed at once, a compact log's start is read (`start`: that
-- GETRANGE's reply, where the call already asked it). TYPE is asked only
-- where that does not tell.
local function open_log(key, first_member, floor, start)
  if floor and ENCODING == 'zset' then
    if type(redis_pcall('ZREMRANGEBYSCORE', key, '-inf', num(floor))) == 'number' then
      return zset_log(key, first_member, floor)
    end
  elseif floor then
    start = start or redis_pcall('GETRANGE', key, '0', READ_WHOLE_LAST)
    -- An empty reply is no key, or an empty string.
    if type(start) ~= 'string' or start == '' then start = nil end
  end
  local kind = start and 'string' or redis_call('TYPE', key)['ok']
  if kind == 'zset' or (kind == 'none' and ENCODING == 'zset') then
    return zset_log(key, first_member)
  end
  if kind == 'string' or kind == 'none' then
    local version
    if kind == 'string' then
      version = string_byte(start or redis_call('GETRANGE', key, '4', '4'), start and 5 or 1)
    end
    local log
    if version == 2 or (kind == 'none' and ENCODING == 'compact') then
      log = packed.log(key, kind == 'string', start)
    else
      log = compact_log(key, kind == 'string', start)
    end
    if log then return log end
  end
  return nil, redis.error_reply(ERR_WRONGTYPE)
end

-- The log and the request (parse's, with `*` read off the clock as
-- clock_ms, and with PENALIZE the key's expiry before the call), or nil
-- and an error reply: arguments first, then the key's type. A call that
-- `trims` has its log trimmed to the widest window where that is how the
-- key is asked (`start` as open_log's).
local function prepare(keys, args, command, clock_ms, first_member, trims, start)
  local windows, now, cost, over_limit, oldest = parse(args, command)
  if not windows then return nil, redis.error_reply(now) end
  if #keys ~= 1 then return nil, redis.error_reply(ERR_ONE_KEY) end
  if now == '*' then now = clock_ms end
  -- A penalty may empty the log and write it anew, which drops the key's
  -- expiry; a denial must still not shorten the expiry it had.
  local expiry_before = over_limit == 'PENALIZE' and redis_call('PEXPIRETIME', keys[1])
  local log, failed = open_log(keys[1], first_member, trims and now - windows.widest.ms, start)
  if not log then return nil, failed end
  return log, windows, now, cost, over_limit, expiry_before, oldest
end

-- The last expiry's time and text: calls in the same millisecond with
-- the same window share it, and where calls come further apart a miss
-- costs only the text (num's table would keep, and drop, one per call).
local last_expiry_at, last_expiry_text = false, false

-- Sets the key to expire `ms` after the call's clock, as the module does:
-- at an absolute time, so a long call does not push it later. A time the
-- server's clock has already passed (a window shorter than the call)
-- deletes the key at once, where the module's key expires at once: either
-- way it is gone. Redis also deletes it for a time its clock has just
-- reached, where the module's key lives to the end of that millisecond:
-- for the few-millisecond waits where the call may last that long, such
-- a time is put a millisecond later.
local EXPIRY_CHECKED_BELOW_MS = 10
local function expire_in(key, ms, clock_ms)
  local at = clock_ms + ms
  if ms < EXPIRY_CHECKED_BELOW_MS and at == server_clock() then at = at + 1 end
  local text
  if at == last_expiry_at then
    text = last_expiry_text
  elseif at <= MAX_MS then
    text = whole_text(at)
    last_expiry_at, last_expiry_text = at, text
  else
    -- Past 2^53 (an entry that never leaves: a wait of 2^54) a double
    -- would round the sum; added in parts of 10^8 it is exact.
    local low = clock_ms % 1e8 + ms % 1e8
    local high = (clock_ms - clock_ms % 1e8) / 1e8 + (ms - ms % 1e8) / 1e8 + (low - low % 1e8) / 1e8
    text = string_format('%d%08d', high, low % 1e8)
  end
  redis_call('PEXPIREAT', key, text)
end

-- Sets the key to expire `ms` after the call, as expire_in, where the
-- call has not read the server's clock (`clock_ms` false): PEXPIRE takes
-- the clock as it runs, a TIME fewer, and is propagated as PEXPIREAT.
local function expire_after(key, ms, clock_ms)
  if clock_ms or ms < EXPIRY_CHECKED_BELOW_MS then
    expire_in(key, ms, clock_ms or server_clock())
  else
    redis_call('PEXPIRE', key, num(ms))
  end
end

-- A denial's expiry, as swl_check sets it: lengthened where it ends
-- before the newest entry leaves, `reset` ms from the call.
local function deny_expiry(key, reset, clock_ms)
  if clock_ms then
    local current = redis_call('PEXPIRETIME', key)
    if current ~= -2 and (current < 0 or current < clock_ms + reset) then
      expire_in(key, reset, clock_ms)
    end
  else
    local ttl = redis_call('PTTL', key)
    if ttl ~= -2 and (ttl < 0 or ttl < reset) then expire_after(key, reset, false) end
  end
end

-- The usual check with a second window on a packed log (see
-- packed.check_kept), whose value starts with `start`: its reply, with
-- the expiry swl_check would set; nil otherwise, having written nothing.
local function two_windows_check(key, start, whole, window, second, now, clock_ms)
  local wide, narrow = window, second
  if second.ms > window.ms then wide, narrow = second, window end
  local allowed, count, newest, score, narrow_count, narrow_score =
    packed.check_kept(key, start, whole, now - wide.ms, wide.limit, now, now - narrow.ms, narrow.limit)
  if allowed == nil then return nil end
  local first_count = wide == window and count or narrow_count
  local second_count = wide == second and count or narrow_count
  if allowed then
    -- The window with the fewest left binds, the first where they tie,
    -- as verdict's.
    local left, bound = window.limit - first_count, window
    if second.limit - second_count < left then bound, left = second, second.limit - second_count end
    local reset = newest > now and ms_until_left(newest, wide.ms, now) or wide.ms
    expire_after(key, reset, clock_ms)
    return { 1, bound.limit, left, -1, reset, bound.ms }
  end
  -- Denied: among the windows it does not fit, the longest wait binds
  -- (-1, where waiting cannot help, the longest), the first where they
  -- tie, as verdict's (check_kept declines waits past 2^53 ms).
  local bound, bound_count, bound_retry
  for i = 1, 2 do
    local w = i == 1 and window or second
    local w_count = i == 1 and first_count or second_count
    if w_count + 1 > w.limit then
      local retry = -1
      if w.limit >= 1 then
        retry = ms_until_left(w == wide and score or narrow_score, w.ms, now)
        if retry < 1 then retry = 1 end
      end
      if not bound or (bound_retry ~= -1 and (retry == -1 or retry > bound_retry)) then
        bound, bound_count, bound_retry = w, w_count, retry
      end
    end
  end
  local left = bound_count < bound.limit and bound.limit - bound_count or 0
  local reset = newest > now - wide.ms and ms_until_left(newest, wide.ms, now) or 0
  deny_expiry(key, reset, clock_ms)
  return { 0, bound.limit, left, bound_retry, reset, bound.ms }
end

-- The usual check, one window and cost 1, straight through where new logs
-- are packed (see packed.check_kept and packed.check_one) or sorted sets
-- (zset.check_usual): its reply, with the expiry swl_check would set; nil
-- otherwise, having written nothing,
-- and the reply of the GETRANGE of the value's start where it was asked,
-- and the server's clock where it was read (now `*`).
local function usual_check(key, args)
  local window = parse_window(args[1], args[2])
  if not window then return nil end
  -- A second window (WINDOW ms limit), on packed logs: the wider one
  -- trims, and both count.
  local second
  if #args == 6 then
    if ENCODING == 'zset' or string.upper(args[4]) ~= 'WINDOW' then return nil end
    second = parse_window(args[5], args[6])
    if not second then return nil end
  end
  local now, clock_ms, seconds, micros = args[3], false, nil, nil
  if now == '*' then
    clock_ms, seconds, micros = server_clock()
    now = clock_ms
  else
    now = integer_of(now)
    if not now or now > MAX_MS then return nil end
  end
  local ms, limit = window.ms, window.limit
  local allowed, count, newest, score, start, whole
  if ENCODING ~= 'zset' then
    local read, read_last = packed.usual_read(key)
    start = redis_pcall('GETRANGE', key, '0', read_last)
    whole = type(start) == 'string' and #start < read
  end
  if type(start) ~= 'string' then
    -- A sorted set: where new logs are packed, one from before the
    -- setting changed (GETRANGE's error), or anything else, declined.
    -- (The general path reads the value's start again unless this is
    -- all of it.)
    if not second and limit >= 1 then
      allowed, count, newest, score = zset.check_usual(key, now - ms, limit, now, seconds, micros)
    end
    if allowed == nil then return nil, start, clock_ms, seconds, micros end
  elseif second then
    local reply = two_windows_check(key, start, whole, window, second, now, clock_ms)
    if reply then return reply end
    return nil, whole and start or nil, clock_ms, seconds, micros
  else
    allowed, count, newest, score = packed.check_kept(key, start, whole, now - ms, limit, now)
    if allowed == nil and whole then
      allowed, count, newest, score = packed.check_one(key, start, now - ms, limit, now)
    end
    if allowed == nil then return nil, whole and start or nil, clock_ms, seconds, micros end
  end
  local left = count < limit and limit - count or 0
  if allowed then
    -- The key lives until the newest entry leaves: a window from now,
    -- where the entry at now is the newest.
    local reset = newest > now and ms_until_left(newest, ms, now) or ms
    expire_after(key, reset, clock_ms)
    return { 1, limit, left, -1, reset, ms }
  end
  -- As verdict's and swl_check's for a denial of one window.
  local retry = -1
  if limit >= 1 then
    retry = ms_until_left(score, ms, now)
    if retry < 1 then retry = 1 end
  end
  local reset = newest > now - ms and ms_until_left(newest, ms, now) or 0
  deny_expiry(key, reset, clock_ms)
  return { 0, limit, left, retry, reset, ms }
end

-- The check at `clock_ms` (and `seconds` and `micros`, the clock's parts),
-- the value's `start` read where usual_check read it.
local function swl_check(keys, args, clock_ms, seconds, micros, start)
  local log, windows, now, cost, over_limit, expiry_before =
    prepare(keys, args, 'swl.check', clock_ms, first_member_at(seconds, micros), true, start)
  if not log then return windows end
  local key = keys[1]

  log:trim_through(now - windows.widest.ms)
  local before, allowed = counts(log, windows, now, cost)
  -- A forced request is recorded whether or not it fits, uncapped.
  local recorded, cap = 0, nil
  if allowed or over_limit == 'FORCE' then
    recorded = cost
  elseif over_limit == 'PENALIZE' then
    -- Record no more than the cap keeps; entries after now outrank them.
    cap = windows.largest_limit
    recorded = math.min(cost, math.max(0, cap - log:count_above(now)))
  end
  -- Capped first, keeping room for what is recorded: the same entries as
  -- recording then capping, as the module does it.
  if cap then log:cap_to(cap - recorded) end
  if recorded > 0 then
    -- A compact log this call emptied is recorded into as a new one: in
    -- the format version the setting names, as the module makes it (under
    -- compact1 never a version 0.3 cannot read).
    if (log == compact.methods and not compact.exists()) or (log == packed.methods and not packed.exists()) then
      if not log:finish() then return redis.error_reply(ERR_WRONGTYPE) end
      if ENCODING == 'compact1' then log = compact_log(key, false) else log = packed.log(key, false) end
    end
    log:record(now, recorded)
  end
  if not log:finish() then return redis.error_reply(ERR_WRONGTYPE) end
  local after = before
  if recorded > 0 or cap then after = add_recorded(before, recorded, cap) end
  local reply = verdict(log, windows, after, now, cost, allowed, false)
  -- The key lives at least until its newest entry leaves the window: the
  -- call's clock + reset_after_ms. An admit, or a forced request, sets
  -- that (it recorded, so the key is there); a denial only lengthens a
  -- shorter expiry (or repairs a missing one). PEXPIRETIME is -2 for no
  -- key (the log emptied), -1 for no expiry.
  if allowed or over_limit == 'FORCE' then
    expire_in(key, reply[5], clock_ms)
  else
    local current = redis_call('PEXPIRETIME', key)
    local kept = expiry_before or current
    if current ~= -2 and (kept < 0 or kept < clock_ms + reply[5]) then
      expire_in(key, reply[5], clock_ms)
    elseif current ~= -2 and current ~= kept then
      redis_call('PEXPIREAT', key, num(kept))
    end
  end
  -- Dead slots go last, after the reply and the expiry, as in the module.
  log:reclaim()
  return reply
end

-- What a check would reply now, changing nothing.
local function peek_reply(log, windows, now, cost)
  local before, allowed = counts(log, windows, now, cost)
  local after = allowed and add_recorded(before, cost, nil) or before
  return verdict(log, windows, after, now, cost, allowed, allowed)
end

-- Milliseconds until the oldest entry in the window of `ms` leaves it,
-- counting a `pending` request at now as recorded; 0 when the window holds
-- none.
local function oldest_after(log, ms, now, pending)
  local in_window = log:count_above(now - ms)
  local oldest = in_window > 0 and log:score_at(log:len() - in_window) or nil
  if pending and not (oldest and oldest <= now) then oldest = now end
  return oldest and ms_until_left(oldest, ms, now) or 0
end

local function swl_peek(keys, args)
  local clock_ms = server_clock()
  local log, windows, now, cost, _, _, oldest = prepare(keys, args, 'swl.peek', clock_ms)
  if not log then return windows end
  local reply = peek_reply(log, windows, now, cost)
  -- OLDEST: when the oldest entry in the reply's window leaves it.
  if oldest then reply[7] = oldest_after(log, reply[6], now, reply[1] == 1) end
  return reply
end

local function swl_refund(keys, args)
  local clock_ms, seconds, micros = server_clock()
  local log, windows, now, cost =
    prepare(keys, args, 'swl.refund', clock_ms, first_member_at(seconds, micros), true)
  if not log then return windows end
  local wide = windows.widest
  log:trim_through(now - wide.ms)
  log:drop_newest(cost)
  if not log:finish() then return redis.error_reply(ERR_WRONGTYPE) end
  -- As after an admitted check: the key goes when its newest entry leaves
  -- the window (the reply's reset counts a request not recorded), at once
  -- where none is left in it (a compact log whose head another writer
  -- moved to its end).
  local len, lives = log:len(), 0
  if len > 0 then
    local newest = log:score_at(len - 1)
    lives = newest > now - wide.ms and ms_until_left(newest, wide.ms, now) or 0
  end
  -- The reply before the expiry: on Redis 7.0 an expiry the clock has
  -- passed (a long call) deletes the key at once, and nothing is read after.
  local reply = peek_reply(log, windows, now, cost)
  expire_in(keys[1], lives, clock_ms)
  log:reclaim()
  return reply
end

local function swl_entries(keys, args)
  if #args ~= 0 then
    return redis.error_reply("ERR wrong number of arguments for 'swl.entries' command")
  end
  if #keys ~= 1 then return redis.error_reply(ERR_ONE_KEY) end
  local log, failed = open_log(keys[1])
  if not log then return failed end
  local times = log:entries()
  if not times then return redis.error_reply(ERR_WRONGTYPE) end
  return times
end

-- `reply`, once what the call read of a value is dropped (the library's
-- state outlives the call, and a value it holds is memory that maxmemory
-- does not count), and the garbage of a large value it made or decoded at
-- once collected: Redis steps the Lua collector only every so many calls,
-- which would leave it to later, small calls.
local function released(reply)
  if opened_string then
    opened_string = false
    compact.release()
    packed.release()
  end
  if made_large then
    made_large = false
    collectgarbage('collect')
  end
  return reply
end

-- A callback that releases (see released) when it returns.
local function closing(callback)
  return function(keys, args)
    if not redis_call then bind_globals() end
    return released(callback(keys, args))
  end
end


swl_peek, swl_refund, swl_entries = closing(swl_peek), closing(swl_refund), closing(swl_entries)
-- The usual check is answered first, with nothing to release after it
-- (where new logs are packed or sorted sets: under compact1 its logs are
-- few); any other goes on to the general path, released as the other
-- commands are.
local general_check = swl_check
swl_check = function(keys, args)
  if not redis_call then bind_globals() end
  local start, clock_ms, seconds, micros
  if (#args == 3 or #args == 6) and #keys == 1 and ENCODING ~= 'compact1' then
    local reply
    reply, start, clock_ms, seconds, micros = usual_check(keys[1], args)
    if reply then return reply end
  end
  if not clock_ms then clock_ms, seconds, micros = server_clock() end
  return released(general_check(keys, args, clock_ms, seconds, micros, start))
end

return { check = swl_check, peek = swl_peek, refund = swl_refund, entries = swl_entries }
