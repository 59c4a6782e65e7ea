#!lua name=swl
--[[
redis-swl without the module: a Redis Functions library (Redis 7+) with the
same arguments, replies, errors and key contents as SWL.CHECK, SWL.PEEK,
SWL.REFUND and SWL.ENTRIES, for servers that cannot load modules. It reads and writes both
encodings of a log, sorted sets and compact logs, as the module does.

  redis-cli FUNCTION LOAD REPLACE "$(cat scripts/swl.lua)"
  FCALL swl_check   1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [PENALIZE | FORCE]
  FCALL swl_peek    1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [OLDEST]
  FCALL swl_refund  1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
  FCALL swl_entries 1 key

A compact log is left with the same bytes as the module leaves; in a sorted
set only the members of the entries differ from the module's (both are
random 14-digit numbers). It is slower: see "Choosing" in the README.
]]

-- How a new log is stored, as the module's swl.encoding: 'compact' (a
-- compact log string in format version 2, the default), 'compact1'
-- (format version 1, which 0.3 reads: while 0.3 still serves the keys) or
-- 'zset' (a sorted set, as the usual script's keys). Existing keys keep
-- theirs. Change it by loading the library with this line edited
-- (docs/encodings.md).
local ENCODING = 'compact'

--[[ ======== error: lua/error.lua (mirrors src/error.rs) ======== ]]

-- The error replies, as src/error.rs writes them (tests/library.rs
-- compares the two).
local ERR_WINDOW = 'ERR window_ms must be an integer from 1 to 9007199254740991'
local ERR_LIMIT = 'ERR limit must be an integer from 0 to 9007199254740991'
local ERR_NOW = 'ERR now_ms must be an integer from 0 to 9007199254740991, or *'
local ERR_COST = 'ERR cost must be an integer from 1 to 100000'
local ERR_WINDOWS = 'ERR too many windows: at most 100 per call'
local ERR_SYNTAX = 'ERR syntax error'
local ERR_WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local ERR_ONE_KEY = 'ERR the function takes exactly one key'

--[[ ======== prelude: lua/prelude.lua ======== ]]

-- What every module uses: limits, the bound globals, number texts, the
-- search, and how strings are sized. Its locals are the main chunk's.

local MAX_MS = 9007199254740991
local MAX_COST = 100000
-- Windows per call, the first one included (the module's MAX_WINDOWS).
local MAX_WINDOWS = 100
-- The wait for an entry that never leaves its window (2^54, exact as a double).
local NEVER_MS = 18014398509481984
local TWO_32 = 4294967296
-- The high half of 2^53, the first value past MAX_MS + 1.
local HIGH_OF_2_53 = 2097152

-- Redis's and Lua's functions that calls use most, as locals: a global's
-- field costs about 300 instructions a use, a local 40. A library
-- reaches them only once called (loading sees little more than
-- redis.register_function), so the first call binds them on its way in.
local redis_call, redis_pcall, string_byte, string_char, string_format
local struct_pack, struct_unpack, unpack
local setmetatable
local function bind_globals()
  redis_call, redis_pcall = redis.call, redis.pcall
  string_byte, string_char, string_format = string.byte, string.char, string.format
  -- (The global unpack, which the local of that name hides.)
  struct_pack, struct_unpack, unpack = struct.pack, struct.unpack, _G.unpack
  setmetatable = _G.setmetatable
end

if ENCODING ~= 'zset' and ENCODING ~= 'compact' and ENCODING ~= 'compact1' then
  error("ENCODING must be 'zset', 'compact' or 'compact1'")
end

-- Exact for every integer a score holds. Whole numbers go through the
-- integer format, several times cheaper than the floating-point one, and
-- cheaper than passing a number to redis.call, which Redis formats as a
-- double.
local function whole_text(x)
  if x % 1 == 0 and x > -2 ^ 62 and x < 2 ^ 62 then return string_format('%d', x) end
  return string_format('%.0f', x)
end

-- The texts of numbers that recur from call to call: offsets and ranks
-- in a log, and times, which the calls of one millisecond share (a busy
-- server's usual case), each made once. At most TEXTS_AT_MOST are kept,
-- all dropped when that is reached. Numbers here are never NaN.
local TEXTS_AT_MOST = 1024
local texts, above_texts, texts_kept = {}, {}, 0

-- Counts one more text about to be kept, all dropped first where
-- TEXTS_AT_MOST are.
local function room_for_text()
  if texts_kept == TEXTS_AT_MOST then texts, above_texts, texts_kept = {}, {}, 0 end
  texts_kept = texts_kept + 1
end

local function num(x)
  local text = texts[x]
  if text then return text end
  text = whole_text(x)
  room_for_text()
  texts[x] = text
  return text
end

-- An exclusive lower bound of a score range: '(' and num(x).
local function above(x)
  local text = above_texts[x]
  if text then return text end
  text = '(' .. num(x)
  room_for_text()
  above_texts[x] = text
  return text
end

-- The first index in 0..len-1 where is_before turns false (len if none),
-- assuming it holds on a prefix.
local function partition_point(len, is_before)
  local low, high = 0, len
  while low < high do
    local mid = low + math.floor((high - low) / 2)
    if is_before(mid) then low = mid + 1 else high = mid end
  end
  return low
end

-- A value of at most READ_WHOLE_AT_MOST bytes is read whole, in one
-- GETRANGE; READ_WHOLE_LAST is the offset of its last byte as GETRANGE
-- takes it.
local READ_WHOLE_AT_MOST = 1024
local READ_WHOLE_LAST = '1023'
-- Whether the call made or decoded more than COLLECT_AFTER_BYTES of a
-- value: its garbage is collected when the call ends (see
-- commands.closing).
local made_large = false
-- Whether the call opened a compact log, whose reads its end drops (a
-- call on a sorted set has none to drop).
local opened_string = false
local COLLECT_AFTER_BYTES = 262144
-- The parses kept of values that calls left as they found them, at most.
local LAYOUTS_AT_MOST = 64

-- jemalloc's size class for n bytes: multiples of 16 up to 128, then four
-- evenly spaced classes per power of two. (n + -n % m rounds n up to a
-- multiple of m, in arithmetic rather than calls of math.ceil: this runs
-- as every new log is made.)
local function size_class(n)
  if n <= 128 then return n + -n % 16 end
  local power = 1
  while power < n do power = power * 2 end
  return n + -n % (power / 8)
end

-- The string header (3, 5 or 9 bytes by length) and its NUL.
local function string_overhead(len)
  if len <= 255 then return 4 elseif len <= 65535 then return 6 end
  return 10
end

--[[ ======== request: lua/request.lua (mirrors src/request.rs) ======== ]]

local request = (function()

-- A plain decimal integer: digits only, no sign, spaces or leading zeros;
-- false for anything else. Longer than 16 digits is out of range anyway.
local function integer_of(text)
  if #text == 0 or #text > 16 then return false end
  if text ~= '0' and not string.match(text, '^[1-9][0-9]*$') then return false end
  return tonumber(text)
end

-- integer_of for arguments that repeat from call to call (windows, limits,
-- costs): parsing one costs more than a denial's whole decision, looking
-- one up a table index. At most INTEGERS_AT_MOST are kept, all dropped
-- when that is reached; texts longer than integer_of reads are not kept.
local INTEGERS_AT_MOST = 1024
local integers, integers_kept = {}, 0
local function repeated_integer_of(text)
  local value = integers[text]
  if value == nil then
    value = integer_of(text)
    if #text <= 16 then
      if integers_kept == INTEGERS_AT_MOST then integers, integers_kept = {}, 0 end
      integers[text], integers_kept = value, integers_kept + 1
    end
  end
  return value
end

-- A window of `ms` and `limit`, as text; windows are kept as the texts are
-- (a window table is never changed), so a call with the windows of an
-- earlier one builds none.
local windows_by_text, windows_kept = {}, 0
local function parse_window(ms_text, limit_text)
  local by_limit = windows_by_text[ms_text]
  local window = by_limit and by_limit[limit_text]
  if window then return window end
  local ms = repeated_integer_of(ms_text)
  if not ms or ms < 1 or ms > MAX_MS then return nil, ERR_WINDOW end
  local limit = repeated_integer_of(limit_text)
  if not limit or limit > MAX_MS then return nil, ERR_LIMIT end
  -- A call of one window hands on `alone`, a list of just it.
  window = { ms = ms, limit = limit }
  window.alone = { window, widest = window, largest_limit = limit }
  if windows_kept == INTEGERS_AT_MOST then windows_by_text, windows_kept = {}, 0 end
  if not windows_by_text[ms_text] then windows_by_text[ms_text] = {} end
  windows_by_text[ms_text][limit_text], windows_kept = window, windows_kept + 1
  return window
end

-- The arguments after the key as windows, now (`*` or a time), cost,
-- what a request that does not fit does ('PENALIZE', 'FORCE' or false:
-- refused) and whether to reply the oldest entry's wait; nil and the
-- error otherwise. The windows are a
-- list, with the widest one and the largest limit among them; never
-- change it (one window's is shared from call to call).
local function parse(args, command)
  local n = #args
  if n < 3 then
    return nil, "ERR wrong number of arguments for '" .. command .. "' command"
  end
  local first, err = parse_window(args[1], args[2])
  if not first then return nil, err end
  local now = args[3]
  if now ~= '*' then
    now = integer_of(now)
    if not now or now > MAX_MS then return nil, ERR_NOW end
  end
  if n == 3 then return first.alone, now, 1, false, false end
  local windows = { first, widest = first, largest_limit = first.limit }
  local cost, over_limit, oldest = nil, false, false
  local i = 4
  while i <= n do
    local option = string.upper(args[i])
    if option == 'COST' and not cost then
      if i + 1 > n then return nil, ERR_SYNTAX end
      cost = repeated_integer_of(args[i + 1])
      if not cost or cost < 1 or cost > MAX_COST then return nil, ERR_COST end
      i = i + 2
    elseif option == 'WINDOW' then
      -- Refused at the keyword past the maximum, before its values.
      if #windows == MAX_WINDOWS then return nil, ERR_WINDOWS end
      if i + 2 > n then return nil, ERR_SYNTAX end
      local window
      window, err = parse_window(args[i + 1], args[i + 2])
      if not window then return nil, err end
      windows[#windows + 1] = window
      if window.ms > windows.widest.ms then windows.widest = window end
      if window.limit > windows.largest_limit then windows.largest_limit = window.limit end
      i = i + 3
    elseif (option == 'PENALIZE' or option == 'FORCE') and command == 'swl.check'
        and not over_limit then
      over_limit = option
      i = i + 1
    elseif option == 'OLDEST' and command == 'swl.peek' and not oldest then
      oldest = true
      i = i + 1
    else
      return nil, ERR_SYNTAX
    end
  end
  if #windows == 1 then windows = first.alone end
  return windows, now, cost or 1, over_limit, oldest
end

return { integer_of = integer_of, parse_window = parse_window, parse = parse }
end)()

--[[ ======== window: lua/window.lua (mirrors src/window.rs) ======== ]]

local window = (function()
--[[ The decision, the same for both encodings: src/window.rs in Lua. ]]

-- Each window's entries above its floor, in one table that every call
-- fills afresh (as a log's state), and whether `cost` more fit in every
-- window. (Loops here count windows rather than use ipairs, and compare
-- rather than call math.max: these run on every call, where each
-- function call shows.)
local counted = {}
local function counts(log, windows, now, cost)
  local n, admits = #windows, true
  for i = 1, n do
    local w = windows[i]
    local count = log:count_above(now - w.ms)
    counted[i] = count
    if count + cost > w.limit then admits = false end
  end
  -- An earlier call's windows past these are gone, so #counts is #windows.
  if counted[n + 1] ~= nil then
    for i = n + 1, #counted do counted[i] = nil end
  end
  return counted, admits
end

-- Each window's count after `recorded` entries at now (inside every window)
-- and, with a cap, after only the newest `cap` entries were kept: in
-- `counts`, which the caller no longer needs as it was.
local function add_recorded(counts, recorded, cap)
  for i = 1, #counts do
    local n = counts[i] + recorded
    if cap and n > cap then n = cap end
    counts[i] = n
  end
  return counts
end

-- Milliseconds until an entry at `score` leaves a window of `ms` at `now`:
-- ceil(score) + ms - now, exact while it stays within 2^53 (past that a
-- double rounds it, where the module is exact), NEVER_MS for an entry that
-- never leaves (+inf written by another tool).
local function ms_until_left(score, ms, now)
  if score % 1 ~= 0 then score = math.ceil(score) end
  local wait = (score - now) + ms
  if wait ~= wait or wait <= 0 then return 0 end
  if wait > NEVER_MS then return NEVER_MS end
  return wait
end

-- When `cost` more units fit: once the (limit - cost + 1)-th newest entry
-- leaves the window; and that entry's score, where one was read.
local function retry_after(log, len, w, now, cost)
  if cost > w.limit then return -1 end
  local score = log:score_at(len - (w.limit - cost + 1))
  if not score then return 1 end
  local wait = ms_until_left(score, w.ms, now)
  return wait > 1 and wait or 1, score
end

-- -1 (waiting cannot help) outranks any wait; otherwise the longer wait.
local function waits_longer(retry, than)
  if than == -1 then return false end
  if retry == -1 then return true end
  return retry > than
end

-- exactly_longer and what only it uses, kept to a block (a Lua chunk
-- has at most 200 locals).
local exactly_longer
do

-- Whether the wait for an entry at `score` to leave a window of `ms` at
-- `now` reaches NEVER_MS, where the module stops counting: a score from
-- 2^60 on, or ceil(score) + ms - now >= 2^54, compared by the sign of
-- (score - 2^54) + (ms - now), both parts exact where it matters (below
-- 2^53 no score gets there).
local TWO_53, TWO_60 = 9007199254740992, 1152921504606846976
local function never_leaves(score, ms, now)
  score = math.ceil(score)
  return score >= TWO_60 or (score >= TWO_53 and (score - NEVER_MS) + (ms - now) >= 0)
end

-- Whether the wait for an entry at `score` to leave a window of `ms` is
-- longer than for one at `than_score` and `than_ms`, where both waits
-- rounded to the same double past 2^53 (the module compares them exactly,
-- so the same window binds): ceil(s) + ms - now, capped at NEVER_MS as the
-- module caps it, compared by the sign of the difference, whose two parts
-- are exact.
exactly_longer = function(score, ms, than_score, than_ms, now)
  if never_leaves(than_score, than_ms, now) then return false end
  if never_leaves(score, ms, now) then return true end
  return (math.ceil(score) - math.ceil(than_score)) + (ms - than_ms) > 0
end
end

-- The reply, from each window's count after the call and the log as it
-- stands; `pending` counts `cost` entries at `now` as recorded without
-- their being in the log (SWL.PEEK of an admit).
local function verdict(log, windows, counts, now, cost, allowed, pending)
  -- The window that binds: admitted, the one with the fewest units left;
  -- denied, the longest wait among those the cost does not fit. Only its
  -- reply is made.
  local bound, bound_left, bound_retry, bound_score, len
  for i = 1, #windows do
    local w, count = windows[i], counts[i]
    local limit = w.limit
    local left = count < limit and limit - count or 0
    if allowed then
      if not bound or left < bound_left then bound, bound_left = i, left end
    elseif count + cost > limit then
      len = len or log:len()
      local retry, score = retry_after(log, len, w, now, cost)
      if not bound or waits_longer(retry, bound_retry)
          or (retry == bound_retry and retry > MAX_MS
            and exactly_longer(score, w.ms, bound_score, windows[bound].ms, now)) then
        bound, bound_left, bound_retry, bound_score = i, left, retry, score
      end
    end
  end
  if not bound then
    -- A denial that no window explains any more (a penalty cap shrank the
    -- log): the first window describes it, and the client may retry.
    bound, bound_retry = 1, 1
    local left = windows[1].limit - counts[1]
    bound_left = left > 0 and left or 0
  end
  local wide = windows.widest
  -- An admitted check has just recorded entries at now.
  local newest = log:newest(allowed and not pending and now or nil)
  if newest and not (newest > now - wide.ms) then newest = nil end
  -- An admitted check's entries at now count, also where another writer
  -- damaged the log's ends (as in the module).
  if allowed and not (newest and newest > now) then newest = now end
  local w = windows[bound]
  return { allowed and 1 or 0, w.limit, bound_left, allowed and -1 or bound_retry,
    newest and ms_until_left(newest, wide.ms, now) or 0, w.ms }
end

return { counts = counts, add_recorded = add_recorded, ms_until_left = ms_until_left, verdict = verdict }
end)()

--[[ ======== zset: lua/zset.lua (mirrors src/redis/zset.rs) ======== ]]

local zset = (function()

--[[ The log as a sorted set: one member per entry, scored by its time. ]]

-- Random-looking 14-digit members from the clock (the first is
-- 10^13 + ((seconds mod 90000) * 10^6 + microseconds) * 1000), unique
-- within the key: consecutive numbers, added up to ZADD_AT_MOST at a time
-- with ZADD NX, and more for any that clashed with a member already there.
local ZADD_AT_MOST = 500
local function add_members(key, at, count, member)
  if count == 1 then
    -- The usual call: one entry, no argument list to build.
    count = 1 - redis_call('ZADD', key, 'NX', num(at), string_format('%d', member))
    member = member + 1
  end
  -- Many entries share one score text (Redis would format a number
  -- passed each time).
  local score = count > 0 and num(at)
  while count > 0 do
    local n = count < ZADD_AT_MOST and count or ZADD_AT_MOST
    local args = {}
    for i = 0, n - 1 do
      args[2 * i + 1] = score
      args[2 * i + 2] = whole_text(member + i)
    end
    count = count - redis_call('ZADD', key, 'NX', unpack(args))
    member = member + n
  end
  return member
end


-- The newest entry's score, nil where the set is empty.
local function newest_of(key)
  local entry = redis_call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  return entry[2] and entry[2] + 0
end

-- The newest entries up to this many are read in one ZRANGE (a denial's
-- wait and its reset, then one read). Each score read costs Redis a
-- double formatted as text and Lua one parsed back: more would cost more
-- than a second read.
local TAIL_AT_MOST = 2

-- ZCOUNT and ZRANGE by rank are O(log N). What a call has read is kept
-- until it writes: the count (ZCARD, kept through its own ZADD), the
-- floor the log was last trimmed to (counting above it or any lower floor
-- is the count), the newest entries read by rank, and the newest entry
-- once known (the call's ZADD into an empty log tells it).
--
-- Functions never run at once, so a call has one log open: its state is
-- in the locals below, which the call that opens a log sets afresh, and
-- the log is the table of methods over them. (A table per call, or one
-- reused, costs a hundred or two instructions per field read or set,
-- where a local costs a few; a new table more than the rest of a
-- denial's decision.) What is not known is false.
local Zset = {}
local z_key, z_first_member, z_trimmed_to, z_card, z_tail_from, z_tail, z_newest_at

-- The log in `key`, where a call adds members from `first_member`;
-- `trimmed_to`, when given, is a floor the caller has
-- already trimmed it to.
local function zset_log(key, first_member, trimmed_to)
  z_key, z_first_member, z_trimmed_to = key, first_member, trimmed_to or false
  z_card, z_tail_from, z_tail, z_newest_at = false, false, false, false
  return Zset
end

function Zset:forget() z_card, z_tail_from, z_tail, z_newest_at = false, false, false, false end

function Zset:len()
  local card = z_card
  if not card then
    card = redis_call('ZCARD', z_key)
    z_card = card
  end
  return card
end

function Zset:count_above(floor)
  local trimmed_to = z_trimmed_to
  if trimmed_to and floor <= trimmed_to then return self:len() end
  return redis_call('ZCOUNT', z_key, above(floor), '+inf')
end

function Zset:score_at(rank)
  if rank < 0 then return nil end
  local tail_from = z_tail_from
  if tail_from and rank >= tail_from then return z_tail[rank - tail_from + 1] end
  local from_newest = self:len() - rank
  if from_newest == 1 then
    -- The newest alone, kept as such (no list of one).
    local newest = z_newest_at
    if not newest then
      newest = newest_of(z_key)
      z_newest_at = newest or false
    end
    return newest
  end
  if from_newest > TAIL_AT_MOST then
    local at = num(rank)
    local entry = redis_call('ZRANGE', z_key, at, at, 'WITHSCORES')
    return entry[2] and entry[2] + 0
  end
  local entries = redis_call('ZRANGE', z_key, num(rank), '-1', 'WITHSCORES')
  local tail = {}
  for i = 2, #entries, 2 do tail[i / 2] = entries[i] + 0 end
  z_tail_from, z_tail = rank, tail
  return tail[1]
end

-- The newest entry. Where the caller has just recorded entries at
-- `recorded_at`, a count tells whether any is later, without reading a
-- score (each read costs a double formatted and parsed back); where they
-- went into an empty log, they are the newest.
function Zset:newest(recorded_at)
  if z_newest_at then return z_newest_at end
  if recorded_at and redis_call('ZCOUNT', z_key, above(recorded_at), '+inf') == 0 then
    return recorded_at
  end
  return self:score_at(self:len() - 1)
end

function Zset:trim_through(floor)
  local trimmed_to = z_trimmed_to
  if trimmed_to and floor <= trimmed_to then return end
  redis_call('ZREMRANGEBYSCORE', z_key, '-inf', num(floor))
  self:forget()
  z_trimmed_to = floor
end

function Zset:record(at, count)
  add_members(z_key, at, count, z_first_member)
  local known = z_card
  self:forget()
  if known then z_card = known + count end
  if known == 0 then z_newest_at = at end
  if z_trimmed_to and at <= z_trimmed_to then z_trimmed_to = false end
end

function Zset:cap_to(max_entries)
  local excess = self:len() - max_entries
  if excess > 0 then
    redis_call('ZREMRANGEBYRANK', z_key, '0', num(excess - 1))
    self:forget()
  end
end

function Zset:drop_newest(count)
  redis_call('ZREMRANGEBYRANK', z_key, num(-count), '-1')
  self:forget()
end

-- A sorted set is never found damaged, and has no dead slots.
function Zset:finish() return true end
function Zset:reclaim() end

-- Every entry as SWL.ENTRIES replies it: integers where whole, doubles
-- otherwise (fractional, infinite), which a RESP2 client reads as the
-- text ZRANGE shows and a RESP3 one as doubles, as from the module.
function Zset:entries()
  local times = {}
  local scores = redis_call('ZRANGE', z_key, '0', '-1', 'WITHSCORES')
  for i = 2, #scores, 2 do
    local score = tonumber(scores[i])
    local whole = score == math.floor(score) and math.abs(score) < 9.2e18
    times[#times + 1] = whole and score or { double = score }
  end
  return times
end

-- The members the usual check adds, where a call need not read the
-- clock: numbers counted on from the first such call's clock (its
-- `seconds` and `micros` where it read them, otherwise its `now`), past
-- the 14 digits wrapped back (a clash with a member already there takes
-- the next, as any).
local MEMBERS_FROM, MEMBERS_SPAN = 10000000000000, 90000000000000
local next_member = false
local function member_of_usual(now, seconds, micros)
  local member = next_member
  if not member then
    if not seconds then
      micros = now % 1000
      seconds, micros = (now - micros) / 1000, micros * 1000
    end
    member = MEMBERS_FROM + ((seconds % 90000) * 1000000 + micros) * 1000
  end
  if member >= MEMBERS_FROM + MEMBERS_SPAN then member = member - MEMBERS_SPAN end
  return member
end

-- Keys whose last usual check was denied: a client over its limit mostly
-- stays over it for a while, so its next check first asks whether the
-- log still holds exactly `limit` entries, none to trim (one ZRANGE of
-- ranks -limit - 1 and -limit, whose one entry is then the oldest: the
-- one a denial waits for), where others ask the count first (ZCARD,
-- which an admit needs). A guess either way costs one command more,
-- never a different reply. At most DENIED_KEPT_AT_MOST keys of at most
-- DENIED_KEY_AT_MOST bytes (Lua's memory, which maxmemory does not
-- count, stays a few hundred KB), all dropped when reached.
local DENIED_KEPT_AT_MOST, DENIED_KEY_AT_MOST = 1024, 128
local denied_last, denied_kept = {}, 0

-- The usual check (one window of `limit` >= 1, cost 1, refused over the
-- limit) on the sorted set in `key` at `now` (the clock's `seconds` and
-- `micros` where the call read it), trimmed to `floor`, in the commands
-- it needs and no more: whether it was admitted, its count after, the
-- newest entry and, denied, the entry whose leaving lets a request in (as
-- window.verdict reads them); nil where the key holds anything but a
-- sorted set, having written nothing. A trim that would remove nothing
-- is not sent where a read shows it (a ZREMRANGEBYSCORE that removes
-- nothing changes nothing, and is neither propagated nor notified).
--   admitted: ZREMRANGEBYSCORE, ZCARD, ZADD, ZCOUNT, PEXPIRE (the usual
--     script's four and a count of entries after now, for the reset);
--   denied after a denial, the log still full: two ZRANGEs and PTTL;
--   limit 1 or 2: the newest limit + 1 entries in one ZRANGE, which are
--     the whole log where it holds at most `limit`: its count, oldest and
--     newest, so a denial takes that and PTTL, and an admit whose oldest
--     entry is inside the window ZADD and PEXPIRE after it; where it
--     holds more, the trim, and those entries still tell the count up to
--     `limit` and the entries the reply needs.
local function check_usual(key, floor, limit, now, seconds, micros)
  local from, card, newest = num(-limit), nil, nil
  if limit <= TAIL_AT_MOST then
    local entries = redis_pcall('ZRANGE', key, num(-limit - 1), '-1', 'WITHSCORES')
    if entries.err then return nil end
    local n = #entries
    -- Trimmed where the read does not show that nothing would go: it is
    -- not the whole log, or its oldest entry has left.
    if n > 2 * limit or (n > 0 and entries[2] + 0 <= floor) then
      redis_call('ZREMRANGEBYSCORE', key, '-inf', num(floor))
    end
    -- The entries read that the trim leaves, from the `i`-th score on:
    -- all that the log then holds, unless more than `limit` are left.
    local i = 2
    while i <= n and entries[i] + 0 <= floor do i = i + 2 end
    card = (n - i) / 2 + 1
    if card > limit then return false, limit, entries[n] + 0, entries[4] + 0 end
    if card == limit then return false, limit, entries[n] + 0, entries[i] + 0 end
    if card > 0 then newest = entries[n] + 0 end
  else
    if denied_last[key] then
      local entries = redis_pcall('ZRANGE', key, num(-limit - 1), from, 'WITHSCORES')
      if entries.err then return nil end
      local n = #entries
      if n == 2 then
        -- Exactly `limit` entries: the oldest, and the count the trim leaves.
        local oldest = entries[2] + 0
        if oldest > floor then
          newest = newest_of(key)
          return false, limit, newest, oldest
        end
        card = limit - redis_call('ZREMRANGEBYSCORE', key, '-inf', num(floor))
      else
        redis_call('ZREMRANGEBYSCORE', key, '-inf', num(floor))
        -- Fewer than `limit` entries: admitted, counted after the trim.
        if n == 0 then card = redis_call('ZCARD', key) end
      end
    else
      local trimmed = redis_pcall('ZREMRANGEBYSCORE', key, '-inf', num(floor))
      if type(trimmed) ~= 'number' then return nil end
    end
    if card then
      denied_last[key] = nil
    else
      if not denied_last[key] then card = redis_call('ZCARD', key) end
      if not card or card >= limit then
        local entry = redis_call('ZRANGE', key, from, from, 'WITHSCORES')
        if entry[2] then
          if not denied_last[key] and #key <= DENIED_KEY_AT_MOST then
            if denied_kept == DENIED_KEPT_AT_MOST then denied_last, denied_kept = {}, 0 end
            denied_last[key], denied_kept = true, denied_kept + 1
          end
          newest = newest_of(key)
          return false, limit, newest, entry[2] + 0
        end
        denied_last[key] = nil
        card = card or redis_call('ZCARD', key)
      end
    end
  end
  next_member = add_members(key, now, 1, member_of_usual(now, seconds, micros))
  -- As Zset:newest after a record: what it added is the newest unless an
  -- entry lies after now (no count where the log was empty or its newest
  -- was read).
  if newest then
    if newest < now then newest = now end
  elseif card > 0 and redis_call('ZCOUNT', key, above(now), '+inf') > 0 then
    newest = newest_of(key)
  else
    newest = now
  end
  return true, card + 1, newest
end

return { log = zset_log, check_usual = check_usual }
end)()

--[[ ======== keyspace: lua/keyspace.lua (mirrors src/redis/compact.rs) ======== ]]

local keyspace = (function()
-- The commands the compact codecs (compact, packed) read and write a
-- log's string with, as src/redis/compact.rs issues them: the codecs
-- reach the key through these alone, and issue none themselves. (The
-- commands module reads a value's first bytes itself, to tell which
-- encoding a key holds.) Offsets are
-- numbers, lengths in bytes; what a codec reads is its bytes.
local keyspace = {}

-- `n` bytes from offset `at` (fewer past the value's end).
function keyspace.getrange(key, at, n)
  return redis_call('GETRANGE', key, num(at), num(at + n - 1))
end

-- The value's first READ_WHOLE_AT_MOST bytes.
function keyspace.start(key)
  return redis_call('GETRANGE', key, '0', READ_WHOLE_LAST)
end

function keyspace.strlen(key)
  return redis_call('STRLEN', key)
end

function keyspace.setrange(key, at, bytes)
  redis_call('SETRANGE', key, num(at), bytes)
end

-- The whole value written anew, the key's expiry kept.
function keyspace.set(key, value)
  redis_call('SET', key, value, 'KEEPTTL')
end

function keyspace.unlink(key)
  redis_call('UNLINK', key)
end

function keyspace.exists(key)
  return redis_call('EXISTS', key) == 1
end

return keyspace
end)()

--[[ ======== compact: lua/compact.lua (mirrors src/codec/slots.rs) ======== ]]

local compact = (function()

--[[ The compact log: a string of fixed-width slots, byte for byte as the
module's src/codec/slots.rs reads and writes it (its header comment has the
layout). Every change leaves the bytes the module would leave, so a key can
pass between the module and this library at any time.

Only the slots a call needs are read: the header, then binary searches
over GETRANGE reads of blocks of slots, each read once per call (a write
makes only the blocks it changed be read again). A value of at most
READ_WHOLE_AT_MOST bytes is read whole, in one GETRANGE. Writes are SETRANGE of
the bytes that change, SET KEEPTTL of a value written anew, UNLINK of an
emptied log. ]]

local HEADER_LEN = 24
local MIN_SLOTS = 8
local MIN_LEN = HEADER_LEN + MIN_SLOTS * 4
local HEAD_AT = 16
-- How far below its oldest entry a value made from times is based (the
-- module's ROOM_BELOW_MS).
local ROOM_BELOW_MS = 60000
-- Slots are read in blocks of this many: a binary search's last steps
-- fall in one block, and its first ones in blocks other searches read.
local BLOCK_SLOTS = 64
-- Slots decoded or encoded per call of struct.unpack or struct.pack.
local CHUNK = 128
-- The header as struct.unpack reads it: magic, width, two zero bytes,
-- the base's low and high halves, the head and four zero bytes.
local HEADER_FORMAT = '<c5BHI4I4I4I4'

-- A slot of 8 bytes as a number: exact up to 2^53, math.huge above (past
-- every time a slot may hold).
local function wide_slot(low, high)
  if high > HIGH_OF_2_53 or (high == HIGH_OF_2_53 and low > 0) then return math.huge end
  return high * TWO_32 + low
end

-- A number below 2^53 as its low and high 32 bits, as 8-byte fields hold it.
local function halves_of(value)
  local low = value % TWO_32
  return low, (value - low) / TWO_32
end

local function pack_slot(stored, width)
  if width == 4 then return struct_pack('<I4', stored) end
  return struct_pack('<I4I4', halves_of(stored))
end

-- The `count` slots at the start of `bytes` as numbers.
local function decode_slots(bytes, width, count)
  local slots, at, done = {}, 1, 0
  local halves = width / 4
  while done < count do
    local n = math.min(CHUNK, count - done)
    local parts = { struct_unpack('<' .. string.rep('I4', n * halves), bytes, at) }
    at = parts[n * halves + 1]
    for i = 1, n do
      slots[done + i] = halves == 1 and parts[i] or wide_slot(parts[2 * i - 1], parts[2 * i])
    end
    done = done + n
  end
  return slots
end

-- times[first..last], each stored as time - base + 1.
local function encode_slots(times, first, last, base, width, out)
  local at = first
  while at <= last do
    local n = math.min(CHUNK, last - at + 1)
    local values = {}
    for i = 0, n - 1 do
      local stored = times[at + i] - base + 1
      if width == 4 then
        values[#values + 1] = stored
      else
        local filled = #values
        values[filled + 1], values[filled + 2] = halves_of(stored)
      end
    end
    out[#out + 1] = struct_pack('<' .. string.rep('I4', #values), unpack(values))
    at = at + n
  end
end

-- The number of slots, at least `wanted`, whose value fills the memory
-- Redis allocates for it anyway (as the module sizes it).
local function slots_filling_allocation(wanted, width)
  if wanted < MIN_SLOTS then wanted = MIN_SLOTS end
  local len = HEADER_LEN + wanted * width
  local block = size_class(len + string_overhead(len))
  local room = block - string_overhead(block) - HEADER_LEN
  local slots = (room - room % width) / width
  return slots > wanted and slots or wanted
end

-- The number of slots of a value made for `n` entries: room for an
-- eighth more, at least `spare` and at least 4, filling its allocation.
local function slots_for(n, spare, width)
  local room = (n - n % 8) / 8
  if room < spare then room = spare end
  if room < 4 then room = 4 end
  return slots_filling_allocation(n + room, width)
end

-- A value's header, head 0.
local function header_of(base, width)
  local base_low, base_high = halves_of(base)
  return struct_pack(HEADER_FORMAT, 'SWLc\1', width, 0, base_low, base_high, 0, 0)
end

-- The entries of a new log, before it records any (never changed).
local NO_TIMES = {}

-- A new value holding `times` (ascending) and, where `added` is given,
-- that many entries at `time` placed after the `after` first of them:
-- based ROOM_BELOW_MS below the oldest (or at 0), in the narrowest width
-- that holds them, with free slots for an eighth more (at least
-- `spare`); and its layout, as parsing it would find it: width, base,
-- capacity, the number of entries (head 0), the oldest and the newest.
local function encode(times, spare, time, added, after)
  local kept = #times
  added, after = added or 0, after or kept
  local n = kept + added
  local oldest = (added > 0 and after == 0) and time or times[1]
  local newest = (added > 0 and after == kept) and time or times[kept]
  local base = oldest or 0
  base = base < ROOM_BELOW_MS and 0 or base - ROOM_BELOW_MS
  local span = newest and (newest - base + 1) or 0
  local width = span <= TWO_32 - 1 and 4 or 8
  local slots = slots_for(n, spare, width)
  local out = { header_of(base, width) }
  if after > 0 then encode_slots(times, 1, after, base, width, out) end
  if added > 0 then out[#out + 1] = string.rep(pack_slot(time - base + 1, width), added) end
  if after < kept then encode_slots(times, after + 1, kept, base, width, out) end
  out[#out + 1] = string.rep('\0', (slots - n) * width)
  return table.concat(out), width, base, slots, n, oldest, newest
end

-- A compact log's state (as a sorted set's, in locals) is what the call
-- has read of the value, kept equal to the stored bytes through every
-- write (its length, the whole value when small or written here, its
-- header, blocks of slots), the value as parsed (again after every
-- change, as the module parses it), and what the call has changed; the
-- log is the methods below.
local Compact = {}
local c_key, c_exists, c_size, c_whole, c_header, c_blocks, c_parsed, c_valid
local c_width, c_base, c_head, c_capacity, c_stop, c_oldest_time, c_newest_time
local c_head_pending, c_damaged, c_trimmed_to
-- An offset of the value at hand from which every byte is known to be
-- zero, where a search or a write showed it.
local c_zero_from

-- The layouts of values that calls left as they found them (denials,
-- mostly): the next call on such a key, as a client that is denied tends
-- to try again, finds the same bytes, and parsing depends on nothing
-- else. Values read whole only; at most LAYOUTS_AT_MOST, all dropped when
-- that is reached.
local layouts, layouts_kept = {}, 0
-- The value as the call read it, where it was read whole.
local c_opened

-- The compact log in `key`, which holds a string (`exists`) or nothing;
-- `start`, where the caller has read it, is the value's first
-- READ_WHOLE_AT_MOST bytes. Nil where the string is not a compact log.
local function compact_log(key, exists, start)
  opened_string = true
  local size, whole, header
  if start and #start < READ_WHOLE_AT_MOST then
    size, whole = #start, start
  else
    header = start
  end
  c_key, c_exists = key, exists
  -- What has been read (see reread): the value's length, the whole value
  -- when small or written here, its start (at least its header), blocks
  -- of slots where they are read.
  c_size, c_whole, c_header, c_blocks = size or false, whole or false, header or false, false
  -- The value as parsed (see reparse and parse): whether it was parsed,
  -- whether it is a log, and its layout (width, base, head, capacity,
  -- stop, oldest_time, newest_time), which is read only where `valid`
  -- says parse has set it for this value.
  c_parsed, c_valid = false, false
  -- A head moved but not yet written: a later change of the call may
  -- find the value damaged, and the call must then leave it as it was.
  c_head_pending = false
  -- A change found bytes that are not a compact log (slots another
  -- writer changed, which a call reads only in part): nothing more is
  -- written.
  c_damaged = false
  -- A floor every live entry is above (see trim_through).
  c_trimmed_to = false
  -- A string is parsed at once: every call needs its layout, and one
  -- that is not a log is the wrong type.
  c_opened, c_zero_from = whole or false, false
  if exists then
    c_parsed = true
    local layout = whole and layouts[whole]
    if layout then
      c_valid = true
      c_width, c_base, c_head, c_capacity, c_stop, c_oldest_time, c_newest_time, c_zero_from =
        layout[1], layout[2], layout[3], layout[4], layout[5], layout[6], layout[7], layout[8]
      return Compact
    end
    c_valid = Compact:parse()
    if not c_valid then return nil end
  end
  return Compact
end

function Compact:reread() c_size, c_whole, c_header, c_blocks = false, false, false, false end
function Compact:reparse() c_parsed, c_valid = false, false end

-- `n` bytes from offset `at` (0-based).
function Compact:read(at, n)
  local whole = c_whole
  if whole then return string.sub(whole, at + 1, at + n) end
  return keyspace.getrange(c_key, at, n)
end

-- The value's length; a value of at most READ_WHOLE_AT_MOST bytes is read
-- whole by the same call.
function Compact:value_len()
  if not c_size then
    local start = c_header or keyspace.start(c_key)
    if #start < READ_WHOLE_AT_MOST then
      c_size, c_whole = #start, start
    else
      c_size = keyspace.strlen(c_key)
      c_header = start
      if c_size == #start then c_whole = start end
    end
  end
  return c_size
end

-- The blocks of slots this call has read, by number (see overlay).
local function blocks_read()
  local blocks = c_blocks
  if not blocks then
    blocks = {}
    c_blocks = blocks
  end
  return blocks
end

-- The bytes of block `block` (BLOCK_SLOTS slots from slot `block` *
-- BLOCK_SLOTS, fewer at the end) of a value not at hand: slots are read
-- a block at a time, each block once a call, and decoded one at a time.
local function block_bytes(block)
  local blocks = blocks_read()
  local bytes = blocks[block]
  if not bytes then
    local first, width = block * BLOCK_SLOTS, c_width
    bytes = Compact:read(HEADER_LEN + first * width, math.min(BLOCK_SLOTS, c_capacity - first) * width)
    blocks[block] = bytes
  end
  return bytes
end

-- Makes what was read show `bytes` at `at`, as the value will hold them.
function Compact:overlay(at, bytes)
  local stop = at + #bytes
  if c_zero_from and stop > c_zero_from then c_zero_from = false end
  if c_whole then c_whole = string.sub(c_whole, 1, at) .. bytes .. string.sub(c_whole, stop + 1) end
  if c_header and at < HEADER_LEN then
    c_header = string.sub(string.sub(c_header, 1, at) .. bytes .. string.sub(c_header, stop + 1), 1, HEADER_LEN)
  end
  if c_blocks and stop > HEADER_LEN then
    local slot_bytes = c_width * BLOCK_SLOTS
    local first = math.floor((math.max(at, HEADER_LEN) - HEADER_LEN) / slot_bytes)
    for block = first, math.floor((stop - 1 - HEADER_LEN) / slot_bytes) do
      c_blocks[block] = nil
    end
  end
  self:reparse()
end

function Compact:write_pending_head()
  if c_head_pending then
    keyspace.setrange(c_key, HEAD_AT, c_head_pending)
    c_head_pending = false
  end
end

-- Writes `bytes` at `at`, within the value, and keeps what was read equal
-- to what is stored. A moved head goes with them, in the same SETRANGE
-- where the whole value is at hand.
function Compact:write(at, bytes)
  if c_head_pending and c_whole and at > HEAD_AT then
    c_head_pending = false
    self:overlay(at, bytes)
    keyspace.setrange(c_key, HEAD_AT, string.sub(c_whole, HEAD_AT + 1, at + #bytes))
    return
  end
  self:write_pending_head()
  keyspace.setrange(c_key, at, bytes)
  self:overlay(at, bytes)
end

-- A new log of `count` entries at `at`, as encode makes it: where its
-- base lies ROOM_BELOW_MS below them, all after its header is the same
-- for a count, and is kept for counts up to NEW_BODIES_KEPT_UP_TO.
do
local NEW_BODIES_KEPT_UP_TO = 16
local bodies, capacities = {}, {}
function Compact:new_value(at, count)
  if at < ROOM_BELOW_MS or count > NEW_BODIES_KEPT_UP_TO then return encode(NO_TIMES, 0, at, count, 0) end
  local body = bodies[count]
  if not body then
    local value, _, _, capacity = encode(NO_TIMES, 0, at, count, 0)
    body, capacities[count] = string.sub(value, HEADER_LEN + 1), capacity
    bodies[count] = body
  end
  local base = at - ROOM_BELOW_MS
  return header_of(base, 4) .. body, 4, base, capacities[count], count, at, at
end
end

-- The whole value written anew, keeping the key's expiry: a value
-- encode made, whose layout it tells (so no parse follows).
-- The whole value written, keeping the key's expiry; a pending head goes
-- with it.
function Compact:set_whole(value)
  if #value > COLLECT_AFTER_BYTES then made_large = true end
  c_head_pending = false
  keyspace.set(c_key, value)
  c_exists = true
end

function Compact:store(value, width, base, capacity, len, oldest, newest)
  self:set_whole(value)
  self:reread()
  c_size, c_whole = #value, value
  c_parsed, c_valid = true, true
  c_width, c_base, c_head, c_capacity = width, base, 0, capacity
  c_stop, c_oldest_time, c_newest_time = len, oldest, newest
  c_zero_from = HEADER_LEN + len * width
end

function Compact:unlink()
  c_head_pending = false
  keyspace.unlink(c_key)
  c_exists, c_zero_from = false, false
  self:reread()
  self:reparse()
end

-- The slot at `index` (0 and up) as stored; 0 past the end. These and
-- the searches below are plain functions, not methods, and a value at
-- hand is read in place: they run several times a call, where each call,
-- lookup and table shows.
local function slot_at(index)
  if index >= c_capacity then return 0 end
  local bytes, at, width = c_whole, nil, c_width
  if bytes then
    at = HEADER_LEN + index * width + 1
  else
    local block = (index - index % BLOCK_SLOTS) / BLOCK_SLOTS
    bytes, at = block_bytes(block), (index - block * BLOCK_SLOTS) * width + 1
  end
  if width == 4 then return (struct_unpack('<I4', bytes, at)) end
  local low, high = struct_unpack('<I4I4', bytes, at)
  return wide_slot(low, high)
end

-- Where a binary search of the slots from `low` to `high` (below the
-- capacity) ends, as the module's partition_point: past every slot it
-- probes that is nonzero (`at_most` nil) or at most `at_most`. Its
-- probes of 4-byte slots are read in place (a probe per call of
-- slot_at took nearly twice the operations: at 100,000 entries a call
-- makes some 70).
local function search_slots(low, high, at_most)
  local width, whole, blocks = c_width, c_whole, false
  if width == 4 and not whole then blocks = blocks_read() end
  while low < high do
    local mid = low + (high - low - (high - low) % 2) / 2
    local value
    if width ~= 4 then
      value = slot_at(mid)
    elseif whole then
      value = struct_unpack('<I4', whole, HEADER_LEN + 4 * mid + 1)
    else
      local block = (mid - mid % BLOCK_SLOTS) / BLOCK_SLOTS
      value = struct_unpack('<I4', blocks[block] or block_bytes(block), (mid - block * BLOCK_SLOTS) * 4 + 1)
    end
    if at_most then
      if value <= at_most then low = mid + 1 else high = mid end
    elseif value ~= 0 then
      low = mid + 1
    else
      high = mid
    end
  end
  return low
end

-- The time of the slot at `index`, if it holds one.
local function time_at(index)
  local value, base = slot_at(index), c_base
  if value == 0 or value - 1 > MAX_MS - base then return nil end
  return base + value - 1
end

local zeros -- READ_WHOLE_AT_MOST zero bytes, made once

-- Whether every byte of `whole` past its first `at` is zero; false where
-- more than READ_WHOLE_AT_MOST bytes follow (the callers then search).
local function zero_past(whole, at)
  if #whole - at > READ_WHOLE_AT_MOST then return false end
  zeros = zeros or string.rep('\0', READ_WHOLE_AT_MOST)
  return string.sub(whole, at + 1) == string.sub(zeros, 1, #whole - at)
end

-- Where the module's search for the first free slot from `head` ends, in
-- a value at hand, found with three string operations rather than its
-- probes where that is certain; nil elsewhere. The first run of `width`
-- zero bytes from the head starts in the slot the search must end at or
-- in the one before it (a nonzero slot then: a zero one would start an
-- earlier run), and no slot before holds such a run; if no byte from the
-- next slot boundary on is nonzero, every slot before it is live and
-- every one from it free, and any search ends there.
local function where_search_ends(whole, width, head, capacity)
  local from = HEADER_LEN + head * width + 1
  local run = string.find(whole, width == 4 and '\0\0\0\0' or '\0\0\0\0\0\0\0\0', from, true)
  if not run then return capacity end
  local into = run - from
  local stop = head + (into - into % width) / width
  if into % width ~= 0 then stop = stop + 1 end
  if zero_past(whole, HEADER_LEN + stop * width) then return stop end
  return nil
end

-- Checks the header and the live range in O(log N), as the module does on
-- every call, and sets the log's layout; false for bytes that are not a
-- compact log. (The layout is locals, not a table of its own: a table
-- costs as much as a search.)
function Compact:parse()
  local len = c_size or self:value_len()
  if len < MIN_LEN then return false end
  local header = c_whole
  if not header then
    header = c_header or self:read(0, HEADER_LEN)
    c_header = header
  end
  local magic, width, reserved, base_low, base_high, head, reserved_too =
    struct_unpack(HEADER_FORMAT, header)
  if magic ~= 'SWLc\1' or (width ~= 4 and width ~= 8) or reserved ~= 0 or reserved_too ~= 0
      or (len - HEADER_LEN) % width ~= 0 or base_high >= HIGH_OF_2_53 then
    return false
  end
  local capacity = (len - HEADER_LEN) / width
  if head > capacity then return false end
  c_width, c_base, c_head, c_capacity = width, base_high * TWO_32 + base_low, head, capacity
  -- The live slots are the nonzero ones from the head on. (The ends of
  -- narrow slots at hand, the usual case, are read here without slot_at.)
  local whole = c_whole
  local narrow = width == 4 and whole
  local low, high = head, capacity
  c_zero_from = false
  -- (Only for a small value: on a large one written here, the scan for a
  -- run of zero bytes costs more than the search.)
  if whole and len <= READ_WHOLE_AT_MOST then
    local stop = where_search_ends(whole, width, head, capacity)
    if stop then low, high, c_zero_from = stop, stop, HEADER_LEN + stop * width end
  end
  if low < high then low = search_slots(low, high, nil) end
  c_stop = low
  if low > head then
    -- Both ends, kept: most counts and waits need no more than these.
    local oldest, newest
    if narrow then
      local first = struct_unpack('<I4', narrow, HEADER_LEN + 4 * head + 1)
      local last = struct_unpack('<I4', narrow, HEADER_LEN + 4 * (low - 1) + 1)
      local base = c_base
      if first ~= 0 and last - 1 <= MAX_MS - base then oldest, newest = base + first - 1, base + last - 1 end
    else
      oldest, newest = time_at(head), time_at(low - 1)
    end
    if not oldest or not newest or oldest > newest then return false end
    c_oldest_time, c_newest_time = oldest, newest
  end
  return true
end

-- Whether the value is a log, parsed once per change.
function Compact:current()
  if not c_parsed then
    c_valid = c_exists and self:parse()
    c_parsed = true
  end
  return c_valid
end

-- Whether a change may go ahead on an existing log: not after one found
-- the value damaged, and not on bytes that no longer parse (which marks
-- them damaged).
function Compact:changeable()
  if c_damaged or not c_exists then return false end
  if c_valid or self:current() then return true end
  c_damaged = true
  return false
end

-- Live entries at or before `t`: none before the oldest, all from the
-- newest, otherwise a binary search.
function Compact:count_through(t)
  local live = c_stop - c_head
  if live == 0 or t < c_oldest_time then return 0 end
  if t >= c_newest_time then return live end
  local limit = t + 1 - c_base
  local head = c_head
  return search_slots(head, c_stop, limit) - head
end

function Compact:live_above(floor)
  local trimmed_to = c_trimmed_to
  local live = c_stop - c_head
  if floor < 0 or (trimmed_to and floor <= trimmed_to) then return live end
  return live - self:count_through(floor)
end

-- The entries from slot `head` to the end of the live ones, each slot
-- checked, and the free slots after them checked to be free; nil if any
-- is not.
function Compact:entries_from(head)
  local width, stop = c_width, c_stop
  local bytes = self:read(HEADER_LEN + head * width, (c_capacity - head) * width)
  -- A decoded slot costs Lua a table entry and more: some 16 bytes a byte.
  if #bytes * 16 > COLLECT_AFTER_BYTES then made_large = true end
  local stored = decode_slots(bytes, width, stop - head)
  local times, base = {}, c_base
  for i, value in ipairs(stored) do
    if value == 0 or value - 1 > MAX_MS - base then return nil end
    local t = base + value - 1
    if i > 1 and times[i - 1] > t then return nil end
    times[i] = t
  end
  local free = string.sub(bytes, (stop - head) * width + 1)
  if free ~= string.rep('\0', #free) then return nil end
  return times
end

-- Moves the head to slot `head` (within the live ones): an emptied log
-- goes, otherwise only the head changes (see reclaim).
function Compact:move_head(head)
  if head == c_head then return end
  if head == c_stop then
    self:unlink()
  else
    c_head_pending = struct_pack('<I4', head)
    self:overlay(HEAD_AT, c_head_pending)
  end
end

-- Writes a new value with the log's base and width, head 0: its live
-- slots with `count` slots holding `stored` before the slot `first`, and
-- room for an eighth more (at least `spare`). The live slots are copied
-- as bytes, unread, so the value is parsed again as the module parses it
-- (slots another writer damaged read as they now lie).
-- The copy is parsed before it is stored, as the module parses its copy:
-- false, writing nothing, where it would not read as holding every entry
-- (its search for the end of the live slots stopping at a slot another
-- writer freed, which would hide the entries after it).
function Compact:rewrite(first, count, stored, spare)
  local width, head, stop = c_width, c_head, c_stop
  local n = stop - head + count
  local slots = slots_for(n, spare, width)
  -- The slots before and after the new ones, each read as it lies (a
  -- large value is not read whole: every copy of it costs).
  local older, newer = '', ''
  if first > head then older = self:read(HEADER_LEN + head * width, (first - head) * width) end
  if stop > first then newer = self:read(HEADER_LEN + first * width, (stop - first) * width) end
  local value = header_of(c_base, width) .. older .. string.rep(pack_slot(stored, width), count)
    .. newer .. string.rep('\0', (slots - n) * width)
  self:reread()
  c_size, c_whole = #value, value
  c_parsed, c_valid = true, self:parse()
  if not (c_valid and c_head == 0 and c_stop == n) then
    self:reread()
    self:reparse()
    return false
  end
  self:set_whole(value)
  return true
end

-- Writes the value anew from its live entries, with `count` more at `at`
-- (none without `at`), based below the oldest in the narrowest width:
-- every slot decoded and encoded. False, writing nothing, where a slot
-- does not hold a time in order.
function Compact:remake(at, count)
  local times = self:entries_from(c_head)
  if not times then return false end
  if at then
    local after = partition_point(#times, function(i) return times[i + 1] <= at end)
    self:store(encode(times, count, at, count, after))
  else
    self:store(encode(times, 0))
  end
  return true
end

-- Whether the log has 8-byte slots where a value made from its live
-- entries (and a time `at`, if given) would take 4: its wide span has
-- left (as the module's narrows_with).
function Compact:narrows_with(at)
  if c_width ~= 8 then return false end
  local oldest, newest = at, at
  if c_stop > c_head then
    oldest, newest = c_oldest_time, c_newest_time
    if at and at < oldest then oldest = at end
    if at and at > newest then newest = at end
  end
  if not oldest then return false end
  local base = oldest < ROOM_BELOW_MS and 0 or oldest - ROOM_BELOW_MS
  return newest - base + 1 <= TWO_32 - 1
end

-- Once the dead slots before the head are over half the value, writes the
-- live ones anew in a value sized for them, with the same base and width
-- (8-byte slots that now fit 4 are made anew from their times). A call's
-- last change, as in the module, once its reply and expiry are set; bytes
-- that no longer parse, or with a free live slot (slots another writer
-- damaged), are left as the call left them.
function Compact:reclaim()
  if c_damaged or not (c_valid or self:current()) or c_head * 2 <= c_capacity then return end
  -- Gone where the call's expiry had already passed (Redis 7.0 deletes
  -- such a key at once): nothing is left to copy, as in the module.
  if not keyspace.exists(c_key) then return end
  if self:narrows_with(nil) and self:remake(nil) then return end
  self:rewrite(c_head, 0, 0, 0)
end

function Compact:len()
  if not (c_valid or self:current()) then return 0 end
  return c_stop - c_head
end

function Compact:count_above(floor)
  if not (c_valid or self:current()) then return 0 end
  return self:live_above(floor)
end

function Compact:score_at(rank)
  if not (c_valid or self:current()) then return nil end
  local live = c_stop - c_head
  if rank < 0 or rank >= live then return nil end
  if rank == 0 then return c_oldest_time end
  if rank == live - 1 then return c_newest_time end
  return time_at(c_head + rank) or MAX_MS
end

-- The newest entry, as the log's ends show it (a damaged value may show
-- one older than what was just recorded).
function Compact:newest()
  if not (c_valid or self:current()) or c_stop == c_head then return nil end
  return c_newest_time
end

-- Remembers the floor: every live entry is above it until an entry at or
-- below it is recorded, so counting above it needs no search.
function Compact:trim_through(floor)
  -- Nothing to trim, the usual case: no search, no change.
  if c_valid and not c_damaged and (c_stop == c_head or floor < c_oldest_time) then
    c_trimmed_to = floor
    return
  end
  if self:changeable() then
    self:move_head(c_stop - self:live_above(floor))
    c_trimmed_to = floor
  end
end

function Compact:cap_to(max_entries)
  if self:changeable() then
    self:move_head(c_stop - math.min(c_stop - c_head, max_entries))
  end
end

-- An entry no older than the newest goes into free slots; an older one to
-- its sorted place, moving the newer slots up. Without room, before the
-- base or past the slot width, the value is written anew with room for
-- an eighth more.
function Compact:record(at, count)
  if c_trimmed_to and at <= c_trimmed_to then c_trimmed_to = false end
  if not c_exists and not c_damaged then
    self:store(self:new_value(at, count))
    return
  end
  if not self:changeable() then return end
  local width = c_width
  local stored = at + 1 - c_base
  local fits = stored >= 1 and (width == 8 or stored <= TWO_32 - 1)
  if not fits then
    if not self:remake(at, count) then c_damaged = true end
    return
  end
  local head, stop = c_head, c_stop
  local first = head + self:count_through(at)
  if c_capacity - stop < count then
    -- Narrowed slots are made from the times; a copy refuses a free live
    -- slot, which would hide what follows it.
    local done
    if self:narrows_with(at) then done = self:remake(at, count)
    else done = self:rewrite(first, count, stored, count) end
    if not done then c_damaged = true end
    return
  end
  local from = HEADER_LEN + first * width
  local moved = ''
  if first < stop then moved = self:read(from, (stop - first) * width) end
  local slot = pack_slot(stored, width)
  local bytes = count == 1 and moved == '' and slot or string.rep(slot, count) .. moved
  local past, zero_from = from + #bytes, c_zero_from
  -- An append to a value at hand, the usual case. The module parses the
  -- value again after it, and its search ends right after the new slots
  -- whenever every slot past them is free (the write leaves those bytes
  -- as they were): until a probe lands on a new slot (the last parse's
  -- search probed the old end, so one does) it makes the last parse's
  -- probes, and after that it probes only past that slot. The layout then
  -- follows without a search.
  if first == stop and c_whole and ((zero_from and zero_from <= from) or zero_past(c_whole, past)) then
    if c_head_pending then
      self:write(from, bytes)
      c_zero_from = past
    else
      -- A call seldom reads the value after recording, so what was read
      -- is dropped rather than patched: a read asks the server again.
      keyspace.setrange(c_key, from, bytes)
      c_whole, c_header, c_blocks, c_zero_from = false, false, false, false
    end
    c_parsed, c_valid, c_stop, c_newest_time = true, true, stop + count, at
    if head == stop then c_oldest_time = at end
    return
  end
  self:write(from, bytes)
end

-- The `count` newest entries go: their slots are freed; all of them, the
-- key.
function Compact:drop_newest(count)
  if not self:changeable() then return end
  local n = c_stop - c_head
  if n == 0 then return end
  if count >= n then
    self:unlink()
  else
    local width = c_width
    self:write(HEADER_LEN + (c_stop - count) * width, string.rep('\0', count * width))
  end
end

-- Ends the call's changes: false if one found the value damaged, which is
-- then left as it was; otherwise a moved head is written.
function Compact:finish()
  if c_damaged then return false end
  if c_head_pending then self:write_pending_head() end
  -- Left as found, parsed: its layout is kept (see layouts).
  local opened = c_opened
  if opened and c_whole == opened and c_parsed and c_valid and not layouts[opened] then
    if layouts_kept == LAYOUTS_AT_MOST then layouts, layouts_kept = {}, 0 end
    local live = c_stop > c_head
    layouts[opened], layouts_kept = { c_width, c_base, c_head, c_capacity, c_stop,
      live and c_oldest_time, live and c_newest_time, c_zero_from }, layouts_kept + 1
  end
  return true
end

-- Every entry, each slot checked; nil if the value is not a compact log.
function Compact:entries()
  if not c_exists then return {} end
  if not self:current() then return nil end
  return self:entries_from(c_head)
end

return {
  log = compact_log,
  methods = Compact,
  -- Whether the key of the log open holds one.
  exists = function() return c_exists end,
  -- Drops what the call read (see commands.released).
  release = function() c_whole, c_header, c_blocks, c_opened = false, false, false, false end,
}
end)()

--[[ ======== packed: lua/packed.lua (mirrors src/codec/packed/) ======== ]]

local packed = (function()
--[[ Compact logs of format version 2 (src/codec/packed/, docs/encodings.md):
times in Elias-Fano blocks of 256 bytes. Read and written with the
module's exact bytes. A block is read once per call and read where it
lies, a few bytes at a time (its high bits eight at a time); the table of
its bytes that the code rewriting a block works on is made only there. ]]

-- The packed log in a key (packed.log, see open_packed), the usual check
-- on one (packed.check_one), and what a call read of one, dropped when it
-- ends (packed.release): their locals are kept to this block.
local packed = {}


local P_HEADER, P_BLOCK, P_MIN_EXTENT, P_MIN_LEN = 24, 256, 32, 56
local P_MAX_L, P_MAX_N = 52, 65535
-- The entries a whole block can hold: one high bit each, no low bits.
local P_MOST_PER_BLOCK = (P_BLOCK - 16) * 8
-- The blocks after the one a time goes into that are coded anew with it,
-- while they hold at most 1,024 entries with it (the module's
-- RECODED_AFTER_AT_MOST and RECODED_ENTRIES_AT_MOST).
local P_RECODED_AFTER_AT_MOST = 4
-- Block tables a call may make or read before its garbage is collected
-- when it ends (see closing).
local P_COLLECT_AFTER_BLOCKS = 8
local TWO_31 = 2147483648
-- Per byte: its set bits, its zero bits, and at NTH_ONE[8 * byte + r]
-- the position of its r-th set bit (from 0, least significant first): the
-- scans of the high bits go a byte at a time, and take the last byte in
-- one lookup rather than bit by bit.
local POW2, POPCOUNT, ZEROS, NTH_ONE = {}, {}, {}, {}
for i = 0, 64 do POW2[i] = 2 ^ i end
for b = 0, 255 do
  local c, x = 0, b
  for bit = 0, 7 do
    if x % 2 == 1 then NTH_ONE[8 * b + c], c = bit, c + 1 end
    x = (x - x % 2) / 2
  end
  POPCOUNT[b], ZEROS[b] = c, 8 - c
end

local function ceil8(x) return (x + 7 - (x + 7) % 8) / 8 end

-- The bytes a block of `n` entries takes, its last with high part `top`.
local function used_bytes(n, l, top) return 16 + ceil8(n * l) + ceil8(top + n) end

-- floor(log2(x)) for x >= 1 (0 for less), at most P_MAX_L: x is
-- m * 2^e with 1/2 <= m < 1, exactly for integers below 2^53.
local function floor_log2(x)
  if x < 2 then return 0 end
  local _, e = math.frexp(x)
  if e - 1 > P_MAX_L then return P_MAX_L end
  return e - 1
end

-- The length, at least `len`, of a value filling its allocation (the
-- module's filling_allocation).
local function filling_allocation(len)
  local block = size_class(len + string_overhead(len))
  for _, overhead in ipairs({ 4, 6, 10 }) do
    local usable = block - overhead
    if string_overhead(usable) + usable <= block then
      return usable > len and usable or len
    end
  end
  return len
end

-- A new value's length for `needed` bytes: an eighth more, filling its
-- allocation.
local function p_sized(needed)
  local len = needed + (needed - needed % 8) / 8
  return filling_allocation(len > P_MIN_LEN and len or P_MIN_LEN)
end

-- The blocks a value of `len` bytes (at least P_HEADER) has room for: a
-- last one shorter than P_MIN_EXTENT is none.
local function p_blocks_in(len)
  local rest = (len - P_HEADER) % P_BLOCK
  return (len - P_HEADER - rest) / P_BLOCK + (rest >= P_MIN_EXTENT and 1 or 0)
end

-- The extent of block `index` in a value of `len` bytes: its 0-based start
-- and its length.
local function p_extent(len, index)
  local start = P_HEADER + index * P_BLOCK
  if start > len then start = len end
  local stop = start + P_BLOCK
  if stop > len then stop = len end
  return start, stop - start
end

-- A block read where it lies: byte k of it (from 1) is byte at + k of
-- `str`, for k up to its extent e, and its header's fields decoded. Its
-- bytes as a table (`t`, what the code that rewrites a block works on)
-- are made only where that code asks for them: a call that reads a few
-- fields of two blocks makes no table of 256 bytes (each costs about
-- what the rest of a check does). Blocks under construction (p_open)
-- have their `t` from the start.
local BLOCK_TABLE = {
  __index = function(b, key)
    if key ~= 't' then return nil end
    local t = { string_byte(b.str, b.at + 1, b.at + b.e) }
    b.t, b.tb = t, t
    return t
  end,
}

-- Lets go of what block `b` read (its string and its table), for a block
-- kept from call to call.
local function p_let_go(b)
  b.t, b.tb, b.str = false, false, false
end

-- Block `bytes` (from byte `from` to `to` where given), in `into` where
-- given (a table a call reuses rather than makes). Its `tb` is its table
-- where made, false until then (a field always there: reading one that
-- is not calls the metatable's __index); `ends` is what p_check_ends
-- found, -1 until it is asked.
local function p_block(bytes, from, to, into)
  local last = #bytes
  if to and to < last then last = to end
  local lo, mid, hi, l8, before, n, top = struct_unpack('<I4I2BBI4I2I2', bytes, from or 1)
  local b = into
  if not b then
    b = setmetatable({}, BLOCK_TABLE)
  else
    if not into.mt then into.mt = setmetatable(into, BLOCK_TABLE) end
    b.t = nil
  end
  b.str, b.at, b.e, b.tb, b.ends = bytes, (from or 1) - 1, last - (from or 1) + 1, false, -1
  -- (l8 as stored is what validation checks against P_MAX_L.)
  b.first, b.l8, b.l = lo + mid * 4294967296 + hi * 281474976710656, l8, l8 > 63 and 63 or l8
  b.before, b.n, b.top = before, n, top
  return b
end

-- Byte k of block b, 0 past its extent.
local function p_byte(b, k)
  local t = b.tb
  if t then return t[k] or 0 end
  if k > b.e then return 0 end
  return string_byte(b.str, b.at + k)
end

-- Byte k of block b from its end (k = 0: its last), 0 before the payload.
local function p_high_byte(b, k)
  local e = b.e
  if k >= e - 16 then return 0 end
  local t = b.tb
  if t then return t[e - k] end
  return string_byte(b.str, b.at + e - k)
end

-- Entry i's low part: floor(bytes / 2^shift) mod 2^l, the bytes from the
-- field's first (0 past the block's extent), in the order of operations
-- that matches the module's read_bits (exact below 2^53).
local function p_low(b, i)
  local l = b.l
  if l == 0 then return 0 end
  local p = i * l
  local shift = p % 8
  local k = 17 + (p - shift) / 8
  local width = shift + l
  local scale = POW2[shift]
  local t, e = b.tb, b.e
  if width <= 8 then
    local x0
    if t then x0 = t[k] or 0 elseif k <= e then x0 = string_byte(b.str, b.at + k) else x0 = 0 end
    return (x0 - x0 % scale) / scale % POW2[l]
  end
  if width <= 32 then
    -- Within four bytes: read them as one number.
    local x0, x1, x2, x3
    if t then
      x0, x1, x2, x3 = t[k] or 0, t[k + 1] or 0, t[k + 2] or 0, t[k + 3] or 0
    else
      local last = k + (width - 1 - (width - 1) % 8) / 8
      if last > e then last = e end
      local at = b.at
      x0, x1, x2, x3 = string_byte(b.str, at + k, at + last)
      x0, x1, x2, x3 = x0 or 0, x1 or 0, x2 or 0, x3 or 0
    end
    local x = x0 + x1 * 256 + x2 * 65536 + x3 * 16777216
    return (x - x % scale) / scale % POW2[l]
  end
  local byte = p_byte(b, k)
  local value = (byte - byte % scale) / scale
  local done = 8 - shift
  while done < l do
    k = k + 1
    byte = p_byte(b, k)
    local need = l - done
    if need < 8 then byte = byte % POW2[need] end
    value = value + byte * POW2[done]
    done = done + 8
  end
  return value
end

-- Bit j of the high bit vector (byte k of it is the k-th from the
-- block's end; past the payload, 0).
local function p_high_bit(b, j)
  local r = j % 8
  local byte = p_high_byte(b, (j - r) / 8)
  return (byte - byte % POW2[r]) / POW2[r] % 2 == 1
end

-- The position of entry i's high bit. The high bytes are read from the
-- block's end eight at a time (one string.byte, their ones summed), and
-- one at a time within the eight that hold it.
local function p_select(b, i)
  local t, e, seen = b.tb, b.e, 0
  if t then
    for k = 0, e - 17 do
      local byte = t[e - k]
      local ones = POPCOUNT[byte]
      if seen + ones > i then return k * 8 + NTH_ONE[8 * byte + i - seen] end
      seen = seen + ones
    end
    return nil
  end
  -- q: the string index of the next byte back (last - q bytes from the
  -- block's end); the payload starts at front.
  local str, last = b.str, b.at + e
  local q, front = last, b.at + 17
  while q - 7 >= front do
    local x1, x2, x3, x4, x5, x6, x7, x8 = string_byte(str, q - 7, q)
    local ones = POPCOUNT[x1] + POPCOUNT[x2] + POPCOUNT[x3] + POPCOUNT[x4]
      + POPCOUNT[x5] + POPCOUNT[x6] + POPCOUNT[x7] + POPCOUNT[x8]
    if seen + ones > i then break end
    seen, q = seen + ones, q - 8
  end
  while q >= front do
    local byte = string_byte(str, q)
    local ones = POPCOUNT[byte]
    if seen + ones > i then return (last - q) * 8 + NTH_ONE[8 * byte + i - seen] end
    seen, q = seen + ones, q - 1
  end
  return nil
end

-- first + high * 2^l + low, where that is a time.
local function p_time_from(first, l, high, low)
  local t = first + high * POW2[l] + low
  if t > MAX_MS then return nil end
  return t
end

local function p_time_of(b, i)
  local j = p_select(b, i)
  if not j or j < i then return nil end
  return p_time_from(b.first, b.l, j - i, p_low(b, i))
end

-- Entries at or before `at` in the block.
local function p_count_through_block(b, at)
  local n = b.n
  local v = at - b.first
  if v < 0 then return 0 end
  local l = b.l
  local low_limit = v % POW2[l]
  local h = (v - low_limit) / POW2[l]
  if h > b.top then return n end
  local ones, zeros, j = 0, 0, 0
  if h > 0 then
    -- The high bits from the block's end up to their h-th zero, counting
    -- zeros: eight bytes at a time (one string.byte) while the zero lies
    -- past them, then a byte at a time.
    local t, e, found = b.tb, b.e, false
    local str, last = b.str, b.at + e
    local q, front = last, b.at + 17
    if t then
      -- (A table's byte x is the string's byte at + x.)
      str, last, q, front = false, e, e, 17
    else
      while q - 7 >= front do
        local x1, x2, x3, x4, x5, x6, x7, x8 = string_byte(str, q - 7, q)
        local z = ZEROS[x1] + ZEROS[x2] + ZEROS[x3] + ZEROS[x4] + ZEROS[x5] + ZEROS[x6]
          + ZEROS[x7] + ZEROS[x8]
        if zeros + z >= h then break end
        zeros, q = zeros + z, q - 8
      end
    end
    while q >= front do
      local byte = t and t[q] or string_byte(str, q)
      local byte_zeros = ZEROS[byte]
      if zeros + byte_zeros < h then
        zeros, q = zeros + byte_zeros, q - 1
      else
        -- Past this byte's (h - zeros)-th zero: the ones before it are
        -- the bits it passes less those zeros.
        local need = h - zeros
        local bit = NTH_ONE[8 * (255 - byte) + need - 1] + 1
        local passed = (last - q) * 8
        ones = passed - zeros + bit - need
        j, found = passed + bit, true
        break
      end
    end
    if not found then
      ones = (e - 16) * 8 - zeros
      return ones < n and ones or n
    end
  end
  while ones < n and p_high_bit(b, j) and p_low(b, ones) <= low_limit do
    ones, j = ones + 1, j + 1
  end
  return ones < n and ones or n
end

-- The newest entry's time, for a block at either end of the live range;
-- nil where it does not hold the times it says (as the module's check_ends).
local function p_read_ends(b)
  local n, l, top, e = b.n, b.l, b.top, b.e
  local l8 = b.tb and b.tb[8] or b.l8
  if n == 0 or l8 > P_MAX_L or b.first > MAX_MS then return nil end
  local low_bits, high_bits = n * l + 7, top + n + 7
  if 16 + (low_bits - low_bits % 8) / 8 + (high_bits - high_bits % 8) / 8 > e then return nil end
  -- The high bits of entry 0 (bit 0) and of entry n - 1 (bit top + n - 1).
  if p_high_byte(b, 0) % 2 == 0 then return nil end
  local j = top + n - 1
  local r = j % 8
  if p_high_byte(b, (j - r) / 8) % POW2[r + 1] < POW2[r] then return nil end
  local time = b.first + top
  if l > 0 then
    -- Entry 0's low field is zero.
    if p_low(b, 0) ~= 0 then return nil end
    time = b.first + top * POW2[l] + p_low(b, n - 1)
  end
  if time > MAX_MS then return nil end
  return time
end

-- p_read_ends, kept on a block read from a value until the call changes
-- it (`ends`: -1 until asked; a block under construction keeps none).
local function p_check_ends(b)
  local ends = b.ends
  if ends == -1 then
    ends = p_read_ends(b) or false
    b.ends = ends
  elseif ends == nil then
    ends = p_read_ends(b) or false
  end
  return ends or nil
end

-- Every entry's time appended to `into`, each bit checked; false where
-- the block is not well formed (`into` then holds some of them).
local function p_times(b, into)
  if not p_check_ends(b) then return false end
  local n, l, top, first = b.n, b.l, b.top, b.first
  local t, e = b.t, b.e
  local count, i, scale, previous = #into, 0, POW2[l], -1
  local high_bits = top + n
  -- The low fields in order, as a stream of bits read two bytes at a
  -- time: `acc` holds the `have` bits read before byte `q` and not yet
  -- taken (below 2^52 for fields of at most 36 bits, exact in a double;
  -- wider ones are read by p_low).
  local acc, have, q, stream = 0, 0, 17, l <= 36
  -- The set bits among the first top + n of the high vector, a byte at a
  -- time from the block's end (bits past them are checked below).
  -- (Each set bit found by table, and the low fields taken from the
  -- stream: a block's decode is most of the call that makes it.)
  for k = 0, (high_bits + 7 - (high_bits + 7) % 8) / 8 - 1 do
    local byte = t[e - k]
    local bits = 8 * byte
    for c = 0, POPCOUNT[byte] - 1 do
      local j = k * 8 + NTH_ONE[bits + c]
      if j >= high_bits then break end
      -- (More set bits than entries: not well formed, and past the low
      -- fields the bytes are not theirs.)
      if i == n then return false end
      local low
      if stream then
        while have < l do
          acc, q, have = acc + (t[q] + (t[q + 1] or 0) * 256) * POW2[have], q + 2, have + 16
        end
        low = acc % scale
        acc, have = (acc - low) / scale, have - l
      else
        low = p_low(b, i)
      end
      local time = first + (j - i) * scale + low
      if previous > time then return false end
      count, previous, i = count + 1, time, i + 1
      into[count] = time
    end
  end
  -- (In order, none is past the newest, which p_check_ends bounds.)
  if i ~= n then return false end
  local low_bits = n * l
  local low_end, high_start = ceil8(low_bits), e - 16 - ceil8(high_bits)
  for k = 17 + low_end, 16 + high_start do
    if t[k] ~= 0 then return false end
  end
  if low_bits % 8 ~= 0 then
    local byte = t[16 + low_end]
    if byte >= POW2[low_bits % 8] then return false end
  end
  if high_bits % 8 ~= 0 then
    local byte = t[17 + high_start]
    if byte >= POW2[high_bits % 8] then return false end
  end
  return true
end

-- Writes the `l` low bits of `value` into t from bit `at` of the payload,
-- whatever those bits held (as the module's write_bits).
local function p_write_bits(t, at, l, value)
  local shift = at % 8
  local width = shift + l
  if width <= 8 then
    local k, scale = 17 + (at - shift) / 8, POW2[shift]
    local byte = t[k]
    t[k] = byte + (value - (byte - byte % scale) / scale % POW2[l]) * scale
    return
  end
  if width <= 32 then
    -- Within two or four bytes (those past the field's last byte, maybe
    -- past the block's end, read as 0 and left): read and written as one
    -- number.
    local k, scale = 17 + (at - shift) / 8, POW2[shift]
    local x = t[k] + t[k + 1] * 256
    if width > 16 then x = x + (t[k + 2] or 0) * 65536 + (t[k + 3] or 0) * 16777216 end
    x = x + (value - (x - x % scale) / scale % POW2[l]) * scale
    local byte = x % 256
    t[k] = byte
    while width > 8 do
      x, k, width = (x - byte) / 256, k + 1, width - 8
      byte = x % 256
      t[k] = byte
    end
    return
  end
  local done = 0
  while done < l do
    local bit = at + done
    local shift = bit % 8
    local k = 17 + (bit - shift) / 8
    local take = 8 - shift
    if take > l - done then take = l - done end
    local part = value % POW2[take]
    value = (value - part) / POW2[take]
    local byte = t[k]
    local held = (byte - byte % POW2[shift]) / POW2[shift] % POW2[take]
    t[k] = byte + (part - held) * POW2[shift]
    done = done + take
  end
end

local function p_set_high_bit(t, e, j)
  local r = j % 8
  local k = e - (j - r) / 8
  local byte = t[k]
  if (byte - byte % POW2[r]) / POW2[r] % 2 == 0 then t[k] = byte + POW2[r] end
end

-- Clears bits [from, to) of a bit vector in t whose bit j is bit j % 8 of
-- byte base + step * floor(j / 8) (the low fields: 17, 1; the high bits
-- from the block's end: e, -1), a byte at a time.
local function p_clear_bits(t, base, step, from, to)
  while from < to do
    local r = from % 8
    local k = base + step * (from - r) / 8
    local stop = from - r + 8
    if stop > to then stop = to end
    if r == 0 and stop - from == 8 then
      t[k] = 0
    else
      -- Bits r to (stop - 1) % 8 + 1 of this byte go; those below and above stay.
      local byte = t[k]
      local above = POW2[stop - (from - r)]
      t[k] = byte % POW2[r] + (byte - byte % above)
    end
    from = stop
  end
end

local function p_set_u16(t, at, v) t[at] = v % 256; t[at + 1] = (v - v % 256) / 256 end

-- A block opened by an entry at `time` (a building block: 256 bytes, high
-- bits at the end).
local P_ZERO_BLOCK = {}
for i = 1, P_BLOCK do P_ZERO_BLOCK[i] = 0 end
local function p_open(time, l, before)
  local t = { unpack(P_ZERO_BLOCK) }
  local x = time
  for i = 1, 7 do
    local byte = x % 256
    t[i] = byte
    x = (x - byte) / 256
  end
  t[8] = l
  x = before
  for i = 9, 12 do
    local byte = x % 256
    t[i] = byte
    x = (x - byte) / 256
  end
  t[13] = 1
  t[P_BLOCK] = 1
  return { t = t, tb = t, e = P_BLOCK, first = time, l = l, before = before, n = 1, top = 0 }
end

-- Adds one entry at `time` (no older than its newest) to a building block
-- if it fits (p_push_run for one, with fewer operations: coding a block
-- anew pushes its entries one at a time); returns 1 if it did.
local function p_push_one(b, time)
  local n, l = b.n, b.l
  local v = time - b.first
  local scale = POW2[l]
  local low = v % scale
  local h = (v - low) / scale
  if h > P_MAX_N or n >= P_MAX_N then return 0 end
  local low_bits, high_bits = (n + 1) * l + 7, h + n + 8
  if 16 + (low_bits - low_bits % 8) / 8 + (high_bits - high_bits % 8) / 8 > P_BLOCK then return 0 end
  local t = b.t
  if low ~= 0 then p_write_bits(t, n * l, l, low) end
  p_set_high_bit(t, P_BLOCK, h + n)
  n = n + 1
  b.n, b.top = n, h
  t[13], t[14] = n % 256, (n - n % 256) / 256
  t[15], t[16] = h % 256, (h - h % 256) / 256
  return 1
end

-- Adds up to `count` entries at `time` (no older than its newest) to a
-- building block, as fit; returns how many did.
local function p_push_run(b, time, count)
  local n, l = b.n, b.l
  local v = time - b.first
  local low = v % POW2[l]
  local h = (v - low) / POW2[l]
  -- The most that fit (as the module's push_run counts them one by one):
  -- about what the free bits hold at l + 1 bits an entry, then a step or
  -- two to the exact figure.
  if h > P_MAX_N then return 0 end
  local most = count
  if most > P_MAX_N - n then most = P_MAX_N - n end
  local fitting = (8 * (P_BLOCK - 18) - n * l - (h + n)) / (l + 1)
  fitting = fitting - fitting % 1
  if fitting < 0 then fitting = 0 end
  if fitting > most then fitting = most end
  while fitting < most and used_bytes(n + fitting + 1, l, h) <= P_BLOCK do fitting = fitting + 1 end
  while fitting > 0 and used_bytes(n + fitting, l, h) > P_BLOCK do fitting = fitting - 1 end
  if fitting == 0 then return 0 end
  local t = b.t
  if low ~= 0 then
    for i = n, n + fitting - 1 do p_write_bits(t, i * l, l, low) end
  end
  -- Bits h + n .. h + n + fitting - 1 of the high vector: whole bytes at
  -- once.
  local j, stop = h + n, h + n + fitting
  while j < stop do
    local r = j % 8
    if r == 0 and stop - j >= 8 then
      t[P_BLOCK - j / 8] = 255
      j = j + 8
    else
      p_set_high_bit(t, P_BLOCK, j)
      j = j + 1
    end
  end
  b.n, b.top = n + fitting, h
  p_set_u16(t, 13, b.n)
  p_set_u16(t, 15, h)
  return fitting
end

-- The block's bytes placed in an extent of `e` bytes (at least what it
-- uses): header and low fields at the front, high bits at the end.
local function p_place(b, e)
  local low_end = 16 + ceil8(b.n * b.l)
  local high_len = ceil8(b.top + b.n)
  local t, from = b.t, b.e
  local parts = { string_char(unpack(t, 1, low_end)), string.rep('\0', e - low_end - high_len) }
  if high_len > 0 then parts[3] = string_char(unpack(t, from - high_len + 1, from)) end
  return table.concat(parts)
end

-- `times` from position `from` to `to`, a list of their own.
local function p_times_from(times, from, to)
  local list = {}
  for i = from, to do list[#list + 1] = times[i] end
  return list
end

-- `times` from position `from` to `to`, each a run of one entry, as
-- p_encode takes them.
local function p_runs_of(times, from, to)
  local runs = {}
  for i = from, to do runs[#runs + 1] = { times[i], 1 } end
  return runs
end

local function p_l_after(b, time)
  local d = time - b.first
  if d < 0 then d = 0 end
  local n = b.n > 0 and b.n or 1
  return floor_log2((d - d % n) / n)
end

local function p_l_from_gap(first, second)
  local d = second - first
  if d < 1 then return 0 end
  return floor_log2(d)
end

-- Codes runs {time, count} (ascending) into building blocks, the first of
-- rank `before`, each block's l from the entries it opens with: log2 of
-- their mean gap over at most 64 after its first. Greedy, or with `spread`
-- k the entries shared out evenly over k blocks; coded through the tail
-- (`to_tail`, with `after` the log's block before the first, or false), a
-- last block read off its few entries takes at least p_l_after's l (as
-- the module's encode and l_ahead).
local function p_encode(runs, before, spread, to_tail, after)
  local blocks, list, remaining = {}, {}, 0
  for i = 1, #runs do
    if runs[i][2] > 0 then list[#list + 1] = runs[i]; remaining = remaining + runs[i][2] end
  end
  local run, used = 1, 0
  while remaining > 0 do
    local target = remaining
    local k = spread and spread - #blocks or 0
    if k > 0 then target = (remaining + k - 1 - (remaining + k - 1) % k) / k end
    local rank = before
    local b = blocks[#blocks]
    if b then rank = (b.before + b.n) % TWO_32 end
    -- l from the entries the block opens with.
    local first = list[run][1]
    local wanted = target - 1
    if wanted > 64 then wanted = 64 end
    local seen = list[run][2] - used - 1
    if seen > wanted then seen = wanted end
    wanted = wanted - seen
    local last, i = first, run + 1
    while wanted > 0 and list[i] do
      local take = list[i][2]
      if take > wanted then take = wanted end
      seen, wanted, last, i = seen + take, wanted - take, list[i][1], i + 1
    end
    local l = 0
    if seen > 0 then
      local d = last - first
      l = floor_log2((d - d % seen) / seen)
    end
    local previous = b or after
    if to_tail and previous and remaining - 1 < 64 then
      local least = p_l_after(previous, first)
      if least > l then l = least end
    end
    b = p_open(first, l, rank)
    local taken = 1
    used = used + 1
    while taken < target do
      if used == list[run][2] then run, used = run + 1, 0 end
      local r = list[run]
      local want = r[2] - used
      if want > target - taken then want = target - taken end
      local pushed
      if want == 1 then pushed = p_push_one(b, r[1]) else pushed = p_push_run(b, r[1], want) end
      if pushed == 0 then break end
      taken, used = taken + pushed, used + pushed
    end
    if used == list[run][2] then run, used = run + 1, 0 end
    remaining = remaining - taken
    blocks[#blocks + 1] = b
  end
  -- A block under construction is a table of 256 numbers, some 4 KB.
  if #blocks > P_COLLECT_AFTER_BLOCKS then made_large = true end
  return blocks
end

-- `str` with `bytes` written at offset `at` (within it), as SETRANGE
-- leaves a value. From offset 0 over all of it, `bytes` itself: a string
-- made again costs a hash of every byte.
local function p_spliced(str, at, bytes)
  local stop = at + #bytes
  if at > 0 then return string.sub(str, 1, at) .. bytes .. string.sub(str, stop + 1) end
  if stop >= #str then return bytes end
  return bytes .. string.sub(str, stop + 1)
end

local function p_header(head_rank, head_block, tail)
  return struct_pack('<c4BBHI4I4I4I4', 'SWLc', 2, 8, 0, head_rank, head_block, tail, 0)
end

-- A value of `blocks` after the whole blocks `kept` (bytes), the first of
-- them the head block; `len` bytes, or sized for them.
-- `blocks` placed in a value of `len` bytes from block `first` on, each in
-- its extent, appended to `parts`.
local function p_placed(blocks, len, first, parts)
  for i, b in ipairs(blocks) do
    local _, e = p_extent(len, first + i - 1)
    parts[#parts + 1] = p_place(b, e)
  end
  return parts
end

local function p_laid_out(blocks, head_rank, kept, room)
  local count = #kept / P_BLOCK + #blocks
  local last = blocks[#blocks]
  local len = p_sized(P_HEADER + (count - 1) * P_BLOCK + used_bytes(last.n, last.l, last.top) + (room or 0))
  local body = table.concat(p_placed(blocks, len, #kept / P_BLOCK, { p_header(head_rank, 0, count - 1), kept }))
  return body .. string.rep('\0', len - #body)
end

-- A packed log's state, as a compact log's: what was read (the value when
-- small, block tables), the header, the ends, what the call changed.
local Packed = {}
local p_key, p_exists, p_value, p_len, p_tables, p_heads
local p_head_rank, p_head_block, p_tail, p_blocks, p_oldest, p_newest
local p_head_pending, p_damaged, p_valid
-- The live entries; a floor every live entry is above (see trim_through).
local p_live, p_trimmed_to
-- The parses of values that calls left as they found them (denials,
-- mostly), keyed by the bytes, as compact logs' layouts are: at most
-- LAYOUTS_AT_MOST, all dropped when that is reached. The value as opened.
local p_parses, p_parses_kept, p_opened = {}, 0, false
-- The value's first READ_WHOLE_AT_MOST bytes as the caller read them, until
-- a write.
local p_start
-- The last blocks before the tail block, read at once for a search (see
-- p_block_through), until a write: their bytes and their offset.
local P_REGION_BLOCKS = 32
local p_region, p_region_from = false, 0
-- Searches among the blocks between head and tail in this call.
local p_searches = 0

-- Where what the call has at hand holds the `n` bytes from offset `at`:
-- the string, and the index of the first of them in it; nil where
-- nothing does (the value when small or written here, its start as the
-- caller read it, a region a search read).
local function p_at_hand(at, n)
  if p_value then return p_value, at + 1 end
  if p_start and at + n <= #p_start then return p_start, at + 1 end
  if p_region and at >= p_region_from and at + n <= p_region_from + #p_region then
    return p_region, at - p_region_from + 1
  end
  return nil
end

-- `n` bytes from offset `at`.
local function p_read(at, n)
  local str, from = p_at_hand(at, n)
  if not str then return keyspace.getrange(p_key, at, n) end
  return string.sub(str, from, from + n - 1)
end

-- Block `index` as a table, read once per call.
local function p_block_at(index)
  local b = p_tables and p_tables[index]
  if not b then
    -- The block's extent (p_extent's, written out: this runs on every call).
    local start = P_HEADER + index * P_BLOCK
    local stop = start + P_BLOCK
    if stop > p_len then stop = p_len end
    if start > stop then start = stop end
    -- Read where it lies in what the call has at hand (a copy of the
    -- block costs a hash of its bytes), otherwise from the server.
    local str, from = p_at_hand(start, stop - start)
    if str then
      b = p_block(str, from, from + stop - start - 1)
    else
      b = p_block(keyspace.getrange(p_key, start, stop - start))
    end
    if not p_tables then p_tables = {} end
    p_tables[index] = b
  end
  return b
end

-- Block `index`'s first time and rank (a search reads only these), kept
-- as p_heads[2 * index] and p_heads[2 * index + 1]; read off whichever
-- string at hand holds them.
local function p_head_of(index)
  local b = p_tables and p_tables[index]
  if b then return b.first, b.before end
  local at = 2 * index
  local first = p_heads and p_heads[at]
  if first then return first, p_heads[at + 1] end
  local start = P_HEADER + index * P_BLOCK
  local str, from = p_at_hand(start, 12)
  if not str then str, from = keyspace.getrange(p_key, start, 12), 1 end
  local lo, mid, hi, before = struct_unpack('<I4I2BxI4', str, from)
  first = lo + mid * 4294967296 + hi * 281474976710656
  if not p_heads then p_heads = {} end
  p_heads[at], p_heads[at + 1] = first, before
  return first, before
end

-- The rank from the head at `head_rank` of a block's first entry, ranked
-- `before` (modulo 2^32), signed.
local function p_rank_from(before, head_rank)
  local d = (before - head_rank) % TWO_32
  if d >= TWO_31 then d = d - TWO_32 end
  return d
end

-- The rank of block `index`'s first entry, from the head (signed).
local function p_rank_of(index)
  local _, before = p_head_of(index)
  return p_rank_from(before, p_head_rank)
end

-- The module's searches of the blocks between the head and tail blocks,
-- written out once for the general path and the straight one, so that
-- both probe a damaged log's blocks as the module does. What a probe
-- compares with is p_sought (a function per call, a closure, shows).
local p_sought = 0

-- The module's partition_point over the `n` blocks after block `low`:
-- `low` and as many more as, from the first, `holds(index)`.
local function p_last_holding(low, n, holds)
  local from, to = 0, n
  while from < to do
    local mid = from + (to - from - (to - from) % 2) / 2
    if holds(low + 1 + mid) then from = mid + 1 else to = mid end
  end
  return low + from
end

-- Block_through's search between `head` and `tail` (the module's
-- guessed_block and searched_from) for the last block that starts by
-- p_sought, where the block after the head starts at `low_first` (by
-- p_sought) and the tail block at `high_first` (past it): from where
-- p_sought lies between them as though each block between spanned as
-- long, in steps of 1, 2, 4, ... toward the answer, then a binary search
-- between the last two probes (`starts_by(index)` says whether a block
-- starts by p_sought). The guess is the module's, in the same doubles.
local function p_search_between(head, tail, low_first, high_first, starts_by)
  local low, high = head + 1, tail
  local count = high - low
  local guess = math.floor((p_sought - low_first) * count / (high_first - low_first))
  if guess > count - 1 then guess = count - 1 end
  -- (As the module's clamp; p_sought is never below low_first here.)
  if guess < 0 then guess = 0 end
  guess = low + guess
  local step = 1
  if guess == low or starts_by(guess) then
    low = guess
    while step < high - low do
      if not starts_by(low + step) then
        high = low + step
        break
      end
      low, step = low + step, step * 2
    end
  else
    high = guess
    while step < high - low do
      if starts_by(high - step) then
        low = high - step
        break
      end
      high, step = high - step, step * 2
    end
  end
  return p_last_holding(low, high - low - 1, starts_by)
end

-- Block_of_rank's search between `head` and `tail` for the block holding
-- the entry ranked p_sought (`ranked_by(index)` says whether a block's
-- first entry ranks no later).
local function p_search_rank(head, tail, ranked_by)
  return p_last_holding(head + 1, tail - head - 2, ranked_by)
end

local function p_head_offset()
  return (p_head_rank - p_block_at(p_head_block).before) % TWO_32
end

-- The newest time of `head`, where it holds the head at `rank` (its ends
-- checked, the rank among its entries), starts no later than the tail
-- block `last`, and `last`'s rank lies past the head block's live entries
-- by no more than the `between` blocks between them can hold (-1: they
-- are one block): what parsing checks of a head block; nil otherwise.
local function p_head_ends(head, rank, last, between)
  local offset = (rank - head.before) % TWO_32
  if offset >= head.n or last.first < head.first then return nil end
  if between >= 0 then
    local past = (last.before - rank) % TWO_32 - (head.n - offset)
    if past < 0 or past > between * P_MOST_PER_BLOCK then return nil end
  end
  return p_check_ends(head)
end

-- Parses the header, the head block and the tail block; false for bytes
-- that are not a packed log.
local function p_parse()
  p_tables, p_heads = false, false
  local known = p_value and p_parses[p_value]
  if known then
    p_head_rank, p_head_block, p_tail, p_blocks = known[1], known[2], known[3], known[4]
    p_newest, p_oldest, p_live = known[5], known[6], known[7]
    return true
  end
  if p_len < P_MIN_LEN then return false end
  local magic, version, shift, reserved, head_rank, head_block, tail, reserved_too =
    struct_unpack('<c4BBHI4I4I4I4', p_value or p_read(0, P_HEADER))
  if magic ~= 'SWLc' or version ~= 2 or shift ~= 8 or reserved ~= 0 or reserved_too ~= 0 then return false end
  local blocks = p_blocks_in(p_len)
  if head_block > tail or tail >= blocks then return false end
  p_head_rank, p_head_block, p_tail, p_blocks = head_rank, head_block, tail, blocks
  local head = p_block_at(head_block)
  local last = tail ~= head_block and p_block_at(tail) or head
  local newest = p_head_ends(head, head_rank, last, tail - head_block - 1)
  if not newest then return false end
  if last ~= head then
    newest = p_check_ends(last)
    if not newest then return false end
  end
  -- The oldest entry, where it is the only one or the head block's first
  -- (as p_oldest_time).
  p_live = ((last.before + last.n) - head_rank) % TWO_32
  p_newest, p_oldest = newest, p_live == 1 and newest or head_rank == head.before and head.first
  return true
end

local function p_ranked_by(index) return p_rank_of(index) <= p_sought end

-- The block holding the live entry at `rank`: the head block and the
-- tail block first, then the module's binary search of the ranks of the
-- blocks between.
local function p_block_of_rank(rank)
  local head, tail = p_head_block, p_tail
  if head == tail or rank < p_rank_of(head) + p_block_at(head).n then return head end
  if p_rank_of(tail) <= rank then return tail end
  p_sought = rank
  return p_search_rank(head, tail, p_ranked_by)
end

local function p_time_at(rank)
  if rank >= p_live then return nil end
  local index = p_block_of_rank(rank)
  local within = rank - p_rank_of(index)
  local t = within >= 0 and p_time_of(p_block_at(index), within)
  return t or MAX_MS
end

-- The oldest live entry, as the module's time_at(0): the newest where it
-- is the only one, the head block's first time where the head is that
-- block's first entry, otherwise a select (which may read bits another
-- writer damaged: the order keeps both reading the same ones).
local function p_oldest_time()
  if not p_oldest then
    local head = p_block_at(p_head_block)
    if p_live == 1 then
      p_oldest = p_newest
    elseif p_head_rank == head.before then
      p_oldest = head.first
    else
      p_oldest = p_time_at(0)
    end
  end
  return p_oldest
end

-- The last block whose first time is at most `at` (as the module's
-- block_through): the head block, the tail block, or the module's search
-- of the blocks between (p_search_between), the last P_REGION_BLOCKS of
-- them read at once where a call searches more than once.
local function p_starts_by(index) return (p_head_of(index)) <= p_sought end

local function p_block_through(at)
  local head, tail = p_head_block, p_tail
  if head == tail then return head end
  local low_first = p_head_of(head + 1)
  if low_first > at then return head end
  local high_first = p_head_of(tail)
  if high_first <= at then return tail end
  if tail - head > 2 then
    -- Redis's Lua hashes every byte of every string it makes (about 12
    -- instructions a byte): the region costs more than the few reads of
    -- one search, and less than those of several.
    p_searches = p_searches + 1
    if not p_value and not p_region and p_searches > 1 then
      local from_block = tail - P_REGION_BLOCKS
      if from_block < head + 1 then from_block = head + 1 end
      p_region_from = P_HEADER + from_block * P_BLOCK
      p_region = keyspace.getrange(p_key, p_region_from, P_HEADER + tail * P_BLOCK - p_region_from)
    end
  end
  p_sought = at
  return p_search_between(head, tail, low_first, high_first, p_starts_by)
end

local function p_count_through(at)
  local len = p_live
  if at >= p_newest then return len end
  if not p_oldest then p_oldest_time() end
  if at < p_oldest then return 0 end
  local index = p_block_through(at)
  local through = p_rank_of(index) + p_count_through_block(p_block_at(index), at)
  if through < 0 then return 0 end
  if through > len then return len end
  return through
end

-- The packed log in `key` (a string, `exists`, or nothing); `start` the
-- value's first READ_WHOLE_AT_MOST bytes where read. Nil for a string
-- that is not a packed log.
local function open_packed(key, exists, start)
  opened_string = true
  p_key, p_exists, p_value, p_len, p_start = key, exists, false, 0, start or false
  p_region, p_searches = false, 0
  p_head_pending, p_damaged, p_valid, p_trimmed_to, p_opened = false, false, false, false, false
  if exists then
    if start and #start < READ_WHOLE_AT_MOST then
      p_value, p_len, p_opened = start, #start, start
    else
      p_len = keyspace.strlen(key)
    end
    p_valid = p_parse()
    if not p_valid then return nil end
  end
  return Packed
end

-- Whether a change may go ahead on an existing log.
local function p_changeable()
  return p_exists and p_valid and not p_damaged
end

-- Writes a moved head; into the value at hand too where `patch` (before a
-- parse may read it: block reads never read the header).
local function p_write_pending_head(patch)
  if p_head_pending then
    p_start = false
    keyspace.setrange(p_key, 8, p_head_pending)
    if patch and p_value then
      p_value = p_spliced(p_value, 8, p_head_pending)
    end
    p_head_pending = false
  end
end

-- Writes `bytes` at `at` and forgets what was read there.
local function p_write(at, bytes)
  p_write_pending_head(true)
  p_start, p_region = false, false
  keyspace.setrange(p_key, at, bytes)
  if p_value then
    p_value = p_spliced(p_value, at, bytes)
  end
end

-- The whole value written anew, keeping the key's expiry, and parsed.
local function p_store(value)
  if #value > COLLECT_AFTER_BYTES then made_large = true end
  p_head_pending, p_start, p_region = false, false, false
  keyspace.set(p_key, value)
  p_exists, p_value, p_len = true, value, #value
  p_valid = p_parse()
end

local function p_unlink()
  p_head_pending, p_start, p_region = false, false, false
  keyspace.unlink(p_key)
  p_exists, p_valid, p_value, p_len, p_live = false, false, false, 0, 0
  p_tables, p_heads = false, false
end

function Packed:len()
  if not p_valid then return 0 end
  return p_live
end

function Packed:count_above(floor)
  if not p_valid then return 0 end
  local len = p_live
  if floor < 0 or (p_trimmed_to and floor <= p_trimmed_to) then return len end
  return len - p_count_through(floor)
end

function Packed:score_at(rank)
  if not p_valid then return nil end
  local len = p_live
  if rank < 0 or rank >= len then return nil end
  if rank == len - 1 then return p_newest end
  if rank == 0 then return p_oldest_time() end
  return p_time_at(rank)
end

function Packed:newest()
  if not p_valid then return nil end
  return p_newest
end

-- Moves the head forward by `dropped` entries: only the header changes.
local function p_move_head(dropped)
  if dropped == 0 then return end
  local len = p_live
  if dropped >= len then
    p_unlink()
    return
  end
  local block = p_block_of_rank(dropped)
  p_head_rank = (p_head_rank + dropped) % TWO_32
  p_head_block = block
  p_oldest, p_live = false, len - dropped
  -- What the module's next parse checks of a new head block (a block
  -- between head and tail that another writer damaged may be found
  -- here): a call that fails it replies WRONGTYPE and writes nothing.
  if not p_head_ends(p_block_at(block), p_head_rank, p_block_at(p_tail), p_tail - block - 1) then
    p_damaged = true
    return
  end
  -- The value at hand keeps its old header until a write needs it new
  -- (see p_write_pending_head): a copy of a value costs a hash of its bytes.
  p_head_pending = struct_pack('<I4I4', p_head_rank, p_head_block)
end

-- Remembers the floor: every live entry is above it until an entry at or
-- below it is recorded, so counting above it needs no search.
function Packed:trim_through(floor)
  if not (p_exists and p_valid and not p_damaged) then return end
  if floor >= 0 then
    local dropped = p_count_through(floor)
    if dropped > 0 then p_move_head(dropped) end
  end
  p_trimmed_to = floor
end

function Packed:cap_to(max_entries)
  if not p_changeable() then return end
  local len = p_live
  p_move_head(len - math.min(len, max_entries))
end

-- A value of the live blocks' bytes, `len` long, the tail block placed in
-- its extent.
local function p_copied(len)
  local whole = (p_tail - p_head_block) * P_BLOCK
  local kept = whole > 0 and p_read(P_HEADER + p_head_block * P_BLOCK, whole) or ''
  local body = p_header(p_head_rank, 0, p_tail - p_head_block) .. kept
  local _, e = p_extent(len, p_tail - p_head_block)
  body = body .. p_place(p_block_at(p_tail), e)
  return body .. string.rep('\0', len - #body)
end

-- The field bytes p_append_one writes, at their block indices.
local FIELD = {}

-- p_append of the usual call, one entry whose `l` is the block's, read
-- and written where the block lies (its table is never made): its low
-- field and its high bit, and the counters. The bytes to write: the
-- block's extent, the bytes around those as they were (one string, which
-- the kept path also keeps as the block written; a range from the
-- counters to the high bit made a second, and Redis's Lua hashes every
-- byte of each). The block read is dropped (a later read asks the server
-- again).
local function p_append_one(tail, start, h, low)
  local n, l, e, str, base = tail.n, tail.l, tail.e, tail.str, tail.at
  local field = n * l
  local j = h + n
  local r = j % 8
  local at_byte = e - (j - r) / 8
  -- (The high bit's byte lies within the extent: the entry fits.)
  local high = string_byte(str, base + at_byte)
  if high % POW2[r + 1] < POW2[r] then high = high + POW2[r] end
  local field_from = 17 + (field - field % 8) / 8
  local field_to = 16 + (field + l + 7 - (field + l + 7) % 8) / 8
  local bytes = ''
  local shift = field % 8
  if l > 0 and shift + l <= 32 and field_from + 3 < at_byte then
    -- The field within four bytes before the high bit's: read as one
    -- number, its bits written (as p_write_bits writes them), the four
    -- written back (those past the field as they were).
    local b0, b1, b2, b3 = string_byte(str, base + field_from, base + field_from + 3)
    local x, scale = b0 + b1 * 256 + b2 * 65536 + b3 * 16777216, POW2[shift]
    x = x + (low - (x - x % scale) / scale % POW2[l]) * scale
    b0 = x % 256
    x = (x - b0) / 256
    b1 = x % 256
    x = (x - b1) / 256
    b2 = x % 256
    bytes, field_to = string_char(b0, b1, b2, (x - b2) / 256), field_from + 3
  elseif l > 0 then
    -- The field's bytes as they are, then its bits written (as p_write_bits
    -- writes them into a block's table).
    local fill_to = field_to > field_from + 3 and field_to or field_from + 3
    for k = field_from, fill_to do FIELD[k] = p_byte(tail, k) end
    p_write_bits(FIELD, field, l, low)
    bytes = string_char(unpack(FIELD, field_from, field_to))
  end
  local m = n + 1
  if p_tables and p_tables[p_tail] == tail then p_tables[p_tail] = nil end
  tail.n, tail.top, tail.ends = m, h, -1
  return start, string.sub(str, base + 1, base + 12) .. struct_pack('<I2I2', m, h)
    .. string.sub(str, base + 17, base + field_from - 1) .. bytes
    .. string.sub(str, base + field_to + 1, base + at_byte - 1) .. string_char(high)
    .. string.sub(str, base + at_byte + 1, base + e)
end

-- Records one entry at `at`, no older than the newest, into the tail block
-- (`tail`) or a free block after it: the bytes to write at an offset, and
-- the tail where it moves; nil where neither takes it.
local function p_append(tail, at, count)
  local first, n, l = tail.first, tail.n, tail.l
  -- A head block whose entries all sit at its first time takes `l` from
  -- the gap to this one (as the module's append).
  if p_tail == p_head_block and (n == 1 or (l == 0 and tail.top == 0)) then l = p_l_from_gap(first, at) end
  local v = at - first
  local scale = POW2[l]
  local low = v % scale
  local h = (v - low) / scale
  -- The tail block's extent: where it starts, and its table's length.
  local start, e = P_HEADER + p_tail * P_BLOCK, tail.e
  -- Whether they fit: n + count low fields and the high bits up to
  -- h + n + count - 1, in whole bytes each (as the module's append).
  local low_bits, high_bits = (n + count) * l + 7, h + n + count + 7
  local needed = 16 + (low_bits - low_bits % 8) / 8 + (high_bits - high_bits % 8) / 8
  if n + count > P_MAX_N or h > P_MAX_N then needed = P_BLOCK + 1 end
  if needed <= e and count == 1 and l == tail.l and not tail.tb then
    return p_append_one(tail, start, h, low)
  end
  if needed <= e then
    local t = tail.t
    local relaid = l ~= tail.l
    local from = relaid and 7 or 12
    t[8] = l
    tail.l = l
    -- Their low fields read zero under the new `l` too.
    if relaid then p_clear_bits(t, 17, 1, 0, n * l) end
    local field = n * l
    local j = h + n
    local r = j % 8
    local at_byte = e - (j - r) / 8
    if count == 1 then
      -- One field and one bit, written out.
      if l > 0 then p_write_bits(t, field, l, low) end
      local byte = t[at_byte]
      if byte % POW2[r + 1] < POW2[r] then t[at_byte] = byte + POW2[r] end
    else
      for i = n, n + count - 1 do
        p_write_bits(t, i * l, l, low)
        p_set_high_bit(t, e, h + i)
      end
    end
    local m = n + count
    tail.n, tail.top, tail.ends = m, h, -1
    t[13], t[14] = m % 256, (m - m % 256) / 256
    t[15], t[16] = h % 256, (h - h % 256) / 256
    -- The changed bytes, from the counters to the high bit. (One entry
    -- into a block read where it lies is p_append_one's.)
    return start + from, string_char(unpack(t, from + 1, at_byte))
  end
  local next_index = p_tail + 1
  -- (With what the tail block would need: a copy of the value with room
  -- to grow takes no more than a whole block.)
  if count > 1 or next_index >= p_blocks then return nil, needed end
  local opened = p_open(at, p_l_after(tail, at), (tail.before + n) % TWO_32)
  local next_start, next_e = p_extent(p_len, next_index)
  return next_start, p_place(opened, next_e), next_index
end

-- Writes `parts`, placed blocks from block `first` on, in place, zero to
-- the end of block `through`, and the tail block number `tail` where it
-- moves; then parses the value again.
local function p_write_blocks(parts, first, through, tail)
  local first_start = p_extent(p_len, first)
  local end_start, end_e = p_extent(p_len, through)
  local body = table.concat(parts)
  p_write(first_start, body .. string.rep('\0', end_start + end_e - first_start - #body))
  if tail ~= p_tail then p_write(16, struct_pack('<I4', tail)) end
  p_valid = p_parse()
end

-- The 4 bytes of a block's rank, `count` more.
local function p_bumped(block, count)
  local before = struct_unpack('<I4', block, 9)
  return p_spliced(block, 8, struct_pack('<I4', (before + count) % TWO_32))
end

-- Codes the block `at` goes into anew, with `count` more entries at `at`,
-- into the blocks they take; the blocks after it move up by the blocks
-- added, as bytes, each counting `count` more entries before it (as the
-- module's insert). False where the block is not well formed.
local function p_insert(at, count)
  local len = p_live
  local through = p_count_through(at)
  local index = through >= len and p_tail or p_block_of_rank(through)
  -- With the few blocks after it: filled again, or shared out evenly,
  -- rather than split (as the module's insert).
  -- (While their entries are few: P_RECODED_ENTRIES_AT_MOST with it.)
  local last, entries = index, p_block_at(index).n
  while last < p_tail and last - index < P_RECODED_AFTER_AT_MOST do
    entries = entries + p_block_at(last + 1).n
    if entries > 1024 then break end
    last = last + 1
  end
  local times = {}
  for i = index, last do
    if not p_times(p_block_at(i), times) then return false end
  end
  local from_rank = p_rank_of(index)
  if from_rank < 0 then from_rank = 0 end
  local skipped = index == p_head_block and p_head_offset() or 0
  local runs = p_runs_of(times, skipped + 1, #times)
  -- A rank another writer damaged can put the time before the block's
  -- first entry: not a log, as the module's insert finds.
  local place = through - from_rank
  if place < 0 then return false end
  if place > #runs then place = #runs end
  table.insert(runs, place + 1, { at, count })
  for i = 2, #runs do
    if runs[i - 1][1] > runs[i][1] then return false end
  end
  local before = (p_head_rank + from_rank) % TWO_32
  local recoded = last - index + 1
  local blocks
  if last == p_tail then
    blocks = p_encode(runs, before, nil, true, index > p_head_block and p_block_at(index - 1))
  else
    -- Shared out evenly over as many blocks as they take filled in order.
    blocks = p_encode(runs, before, #p_encode(runs, before, nil))
  end
  if last == p_tail then
    -- The blocks from `index` to the tail coded anew, in their place where
    -- the value has room (as the module's recode_to_tail).
    local new_last = index + #blocks - 1
    local lb = blocks[#blocks]
    local _, last_e = p_extent(p_len, new_last)
    if not (new_last < p_blocks and used_bytes(lb.n, lb.l, lb.top) <= last_e) then
      local whole = (index - p_head_block) * P_BLOCK
      local kept = whole > 0 and p_read(P_HEADER + p_head_block * P_BLOCK, whole) or ''
      p_store(p_laid_out(blocks, p_head_rank, kept))
      return true
    end
    local parts = p_placed(blocks, p_len, index, {})
    p_write_blocks(parts, index, new_last > p_tail and new_last or p_tail, new_last)
    return true
  end
  local tail = p_tail
  local new_tail = tail + #blocks - recoded
  local tail_block = p_block_at(tail)
  local last_used = used_bytes(tail_block.n, tail_block.l, tail_block.top)
  -- The blocks after the recoded ones, but the tail block, as bytes,
  -- ranks bumped.
  local middle = {}
  if tail > last + 1 then
    local whole = p_read(P_HEADER + (last + 1) * P_BLOCK, (tail - last - 1) * P_BLOCK)
    -- Each block moved makes three strings of its size.
    if tail - last > P_COLLECT_AFTER_BLOCKS then made_large = true end
    for i = 0, tail - last - 2 do
      middle[#middle + 1] = p_bumped(string.sub(whole, i * P_BLOCK + 1, (i + 1) * P_BLOCK), count)
    end
  end
  local _, new_tail_e = p_extent(p_len, new_tail)
  if new_tail >= p_blocks or last_used > new_tail_e then
    -- A new value: the blocks before, the new ones, the ones after.
    local kept_blocks = index - p_head_block
    local kept = kept_blocks > 0 and p_read(P_HEADER + p_head_block * P_BLOCK, kept_blocks * P_BLOCK) or ''
    local count_blocks = kept_blocks + #blocks + (tail - last)
    local new_len = p_sized(P_HEADER + (count_blocks - 1) * P_BLOCK + last_used)
    local parts = p_placed(blocks, new_len, kept_blocks, { p_header(p_head_rank, 0, count_blocks - 1), kept })
    parts[#parts + 1] = table.concat(middle)
    local _, e = p_extent(new_len, count_blocks - 1)
    parts[#parts + 1] = p_bumped(p_place(tail_block, e), count)
    local body = table.concat(parts)
    p_store(body .. string.rep('\0', new_len - #body))
    return true
  end
  -- Up or down by the blocks added or saved (as the module's insert):
  -- through the old tail, so that blocks saved at its end are zeroed.
  local parts = p_placed(blocks, p_len, index, {})
  parts[#parts + 1] = table.concat(middle)
  parts[#parts + 1] = p_bumped(p_place(tail_block, new_tail_e), count)
  p_write_blocks(parts, index, new_tail > tail and new_tail or tail, new_tail)
  return true
end

-- One entry at `at` into block `b` as its entry `place` (before the one
-- there), in its table, where it has room and the entry does not open
-- it: its later low fields up a field, its later high bits up a bit, as
-- they lie (as the module's insert_in_place does within the block).
-- False, having changed nothing, where it does not go so.
local function p_insert_bits(b, place, at)
  local n, top, l, t, e = b.n, b.top, b.t[8], b.t, b.e
  if place > n or l > P_MAX_L or n >= P_MAX_N then return false end
  local v = at - b.first
  if v < 0 then return false end
  local low = v % POW2[l]
  local h = (v - low) / POW2[l]
  if h > P_MAX_N then return false end
  local new_top = top
  if place == n then
    if h < top then return false end
    new_top = h
  elseif h > top then
    return false
  end
  if used_bytes(n + 1, l, new_top) > e then return false end
  if l > 0 then
    for i = n - 1, place, -1 do p_write_bits(t, (i + 1) * l, l, p_low(b, i)) end
    p_write_bits(t, place * l, l, low)
  end
  -- Bit j + 1 takes bit j, from the top down.
  for j = top + n - 1, h + place, -1 do
    local r = (j + 1) % 8
    local k = e - (j + 1 - r) / 8
    local byte = t[k]
    local held = (byte - byte % POW2[r]) / POW2[r] % 2
    local want = p_high_bit(b, j) and 1 or 0
    t[k] = byte + (want - held) * POW2[r]
  end
  p_set_high_bit(t, e, h + place)
  p_set_u16(t, 13, n + 1)
  p_set_u16(t, 15, new_top)
  b.n, b.top, b.ends = n + 1, new_top, -1
  return true
end

-- One entry at `at`, older than the newest, into the block that holds the
-- entries around it, in place (p_insert_bits), and the blocks after it
-- counting one more entry before them (as the module's insert_in_place).
-- False where it does not go so.
function Packed.insert_in_place(at)
  local through = p_count_through(at)
  if through >= p_live then return false end
  local index = p_block_of_rank(through)
  local b = p_block_at(index)
  local place = through - p_rank_of(index)
  local after_live = index == p_head_block and p_head_offset() or 0
  if place <= after_live or not p_insert_bits(b, place, at) then return false end
  local t, e = b.t, b.e
  local start = P_HEADER + index * P_BLOCK
  local parts = { string_char(unpack(t, 13, e)) }
  if index < p_tail then
    local tail_start, tail_e = p_extent(p_len, p_tail)
    local whole = p_read(start + P_BLOCK, tail_start + tail_e - (start + P_BLOCK))
    for i = 0, p_tail - index - 1 do
      parts[#parts + 1] = p_bumped(string.sub(whole, i * P_BLOCK + 1, (i + 1) * P_BLOCK), 1)
      p_tables[index + 1 + i] = nil
    end
    p_heads = false
  end
  p_write(start + 12, table.concat(parts))
  p_live = p_live + 1
  return true
end

-- A new log of `count` entries at `at` that one block holds (at most
-- 1,920): l 0, high bits 0 to count - 1 set (the bytes p_encode and
-- p_laid_out would make, without their tables).
local p_new_tails = {}
local P_NEW_TAILS_KEPT_UP_TO = 16
local function p_new_of(at, count)
  -- The bytes after the block header: zeros, then the high bits (kept for
  -- the few counts that recur).
  local tail = p_new_tails[count]
  if not tail then
    local high_len = (count + 7 - (count + 7) % 8) / 8
    local len = p_sized(P_HEADER + 16 + high_len)
    local rest = count % 8
    local high_bits = string.rep('\255', (count - rest) / 8)
    if rest > 0 then high_bits = string_char(POW2[rest] - 1) .. high_bits end
    -- The high bits end the block's extent, which ends before the value
    -- does where the value has room for more blocks.
    local _, e = p_extent(len, 0)
    tail = string.rep('\0', e - 16 - high_len) .. high_bits .. string.rep('\0', len - P_HEADER - e)
    if count <= P_NEW_TAILS_KEPT_UP_TO then p_new_tails[count] = tail end
  end
  local low = at % TWO_32
  local high = (at - low) / TWO_32
  local mid = high % 65536
  return struct_pack('<c4BBHI4I4I4I4I4HBBI4HH', 'SWLc', 2, 8, 0, 0, 0, 0, 0,
    low, mid, (high - mid) / 65536, 0, 0, count, 0) .. tail
end

-- Live entries `times` (in order) from head rank `rank` coded anew into
-- a value of their size and `room` bytes more, as the module's recoded.
local function p_coded_anew(times, rank, room)
  return p_laid_out(p_encode(p_runs_of(times, 1, #times), rank, nil, true, false), rank, '', room)
end

-- The value `grown` (made by a call, not yet stored) with `count` entries
-- at `at` appended, as record's append tries a grown value; nil where it
-- does not read as a log or its tail block does not take them. The log's
-- state is left parsed from `grown`.
local function p_appended(grown, at, count)
  p_value, p_len = grown, #grown
  if not p_parse() then return nil end
  local offset, bytes, tail = p_append(p_block_at(p_tail), at, count)
  if not offset then return nil end
  grown = p_spliced(grown, offset, bytes)
  if tail then grown = p_spliced(grown, 16, struct_pack('<I4', tail)) end
  return grown
end

function Packed:record(at, count)
  if p_trimmed_to and at <= p_trimmed_to then p_trimmed_to = false end
  if not p_exists and not p_damaged then
    if count <= P_MOST_PER_BLOCK then
      local value = p_new_of(at, count)
      p_head_pending, p_start = false, false
      keyspace.set(p_key, value)
      p_exists, p_value, p_len, p_valid = true, value, #value, true
      p_tables, p_heads = false, false
      p_head_rank, p_head_block, p_tail, p_blocks = 0, 0, 0, 1
      p_newest, p_oldest, p_live = at, at, count
      return
    end
    p_store(p_laid_out(p_encode({ { at, count } }, 0, nil), 0, ''))
    return
  end
  if not p_changeable() then return end
  -- What the tail block would need, where it cannot take them.
  local needed
  if at >= p_newest then
    local offset, bytes, tail = p_append(p_block_at(p_tail), at, count)
    if offset then
      p_write_pending_head()
      keyspace.setrange(p_key, offset, bytes)
      -- A call seldom reads the value after recording, so what was read
      -- is dropped rather than patched (the tail block's table is kept
      -- as written): a read asks the server again.
      p_value, p_start, p_region = false, false, false
      if tail then
        p_heads = false
        p_write(16, struct_pack('<I4', tail))
        p_tail, p_tables[tail] = tail, p_block(bytes)
      end
      p_newest, p_live = at, p_live + count
      return
    end
    needed = bytes
  end
  -- Growth, and the append tried again, unless no copy could take them:
  -- several entries (one opens a block) that a whole tail block would not
  -- hold, where the module's growth fails alike and leaves the value as
  -- it was.
  if at >= p_newest and (count == 1 or needed <= P_BLOCK) then
    local tail_start, tail_e = p_extent(p_len, p_tail)
    local live = P_HEADER + (p_tail - p_head_block) * P_BLOCK + tail_e
    -- One block, mostly dead entries: its live ones coded anew rather than
    -- copied with the dead (as the module's growth).
    local grown = count == 1 and p_tail == p_head_block and p_head_offset() >= p_live
      and Packed.recoded(P_MIN_EXTENT) or p_copied(p_sized(live + P_MIN_EXTENT))
    -- The append tried on the grown value, before it is stored.
    local was_value, was_len, was_tables, was_heads = p_value, p_len, p_tables, p_heads
    local was_rank, was_head, was_tail, was_blocks = p_head_rank, p_head_block, p_tail, p_blocks
    local appended = p_appended(grown, at, count)
    if appended then
      p_store(appended)
      return
    end
    p_value, p_len, p_tables, p_heads = was_value, was_len, was_tables, was_heads
    p_head_rank, p_head_block, p_tail, p_blocks = was_rank, was_head, was_tail, was_blocks
    p_valid = true
  end
  if count == 1 and at < p_newest and Packed.insert_in_place(at) then return end
  if not p_insert(at, count) then p_damaged = true end
end

-- The `count` newest entries go: the tail block's last fields and bits
-- are cleared, and whole blocks emptied freed; all of them, the key.
function Packed:drop_newest(count)
  if not p_changeable() then return end
  local len = p_live
  if count >= len then
    p_unlink()
    return
  end
  local keep = len - count
  local index = p_block_of_rank(keep - 1)
  local keep_n = keep - p_rank_of(index)
  local b = p_block_at(index)
  if not p_check_ends(b) or keep_n <= 0 or keep_n > b.n then
    p_damaged = true
    return
  end
  local last_kept = p_select(b, keep_n - 1)
  if not last_kept then
    p_damaged = true
    return
  end
  local start, e = p_extent(p_len, index)
  local tail_start, tail_e = p_extent(p_len, p_tail)
  local tail_stop = tail_start + tail_e
  local n, l, top, t = b.n, b.l, b.top, b.t
  if keep_n < n then
    p_clear_bits(t, 17, 1, keep_n * l, n * l)
    p_clear_bits(t, e, -1, last_kept + 1, top + n)
    p_set_u16(t, 13, keep_n)
    p_set_u16(t, 15, last_kept - (keep_n - 1))
  end
  local bytes = string_char(unpack(t, 13, e)) .. string.rep('\0', tail_stop - (start + e))
  local old_tail = p_tail
  p_write(start + 12, bytes)
  if index ~= old_tail then p_write(16, struct_pack('<I4', index)) end
  -- What parsing would find again: this block is the tail, its last
  -- entry the newest (its table kept as written).
  for i = index + 1, old_tail do p_tables[i] = nil end
  p_heads = false
  -- A block kept whole keeps its stored top, which parsing reads the
  -- newest entry from (another writer may have changed it).
  if keep_n < n then b.top = last_kept - (keep_n - 1) end
  b.n, b.ends = keep_n, -1
  p_tail, p_live = index, keep
  p_newest = p_time_from(b.first, l, b.top, p_low(b, keep_n - 1)) or MAX_MS
  -- (Read again as the module's parse would: see p_oldest_time.) A trim's
  -- floor no longer tells the count above it: the newest entry may now be
  -- at or below it, where the module counts none above (another writer's
  -- low fields can stop a trim's count short).
  p_oldest, p_trimmed_to = false, false
  -- What the module's next parse checks of the new tail block (a block
  -- between that another writer damaged may be found here): where it
  -- fails, the module reads no log, and neither does the rest of the call.
  if not p_head_ends(p_block_at(p_head_block), p_head_rank, b, index - p_head_block - 1)
      or not p_check_ends(b) then
    p_valid = false
  end
end

-- Keeps the parse of a value that a call left as it found it.
local function p_remember(value, head_rank, head_block, tail, blocks, newest, oldest, live)
  if p_parses_kept == LAYOUTS_AT_MOST then p_parses, p_parses_kept = {}, 0 end
  p_parses[value] = { head_rank, head_block, tail, blocks, newest, oldest, live }
  p_parses_kept = p_parses_kept + 1
end

function Packed:finish()
  if p_damaged then return false end
  local moved = p_head_pending
  p_write_pending_head()
  local opened = p_opened
  if not moved and opened and p_value == opened and p_valid and not p_parses[opened] then
    p_remember(opened, p_head_rank, p_head_block, p_tail, p_blocks, p_newest, p_oldest, p_live)
  end
  return true
end

-- The live entries of a log in its head and tail blocks (one or two), as
-- many dead before them, coded anew into a value of their size and `room`
-- bytes more (as the module's recoded); nil where the blocks do not read
-- as a log.
function Packed.recoded(room)
  local times = {}
  if not p_times(p_block_at(p_head_block), times) then return nil end
  if p_tail ~= p_head_block and not p_times(p_block_at(p_tail), times) then return nil end
  local live = p_times_from(times, p_head_offset() + 1, #times)
  if #live ~= p_live then return nil end
  for i = 2, #live do
    if live[i - 1] > live[i] then return nil end
  end
  return p_coded_anew(live, p_head_rank, room)
end

-- Once the dead blocks are half the value's or more, the live ones copied to
-- a value of their size.
function Packed:reclaim()
  if p_damaged or not p_valid then return end
  local recode = p_tail == p_head_block + 1 and p_head_offset() >= p_live
  if not recode and p_head_block * 2 < p_blocks then return end
  -- Gone where the call's expiry had already passed (see Compact:reclaim).
  if not keyspace.exists(p_key) then return end
  if recode then
    local value = Packed.recoded(0)
    if value then p_store(value) end
    return
  end
  local tail = p_block_at(p_tail)
  local live = P_HEADER + (p_tail - p_head_block) * P_BLOCK + used_bytes(tail.n, tail.l, tail.top)
  p_store(p_copied(p_sized(live)))
end

-- Every entry, every block checked; nil if the value is not a packed log.
function Packed:entries()
  if not p_exists then return {} end
  if not p_valid then return nil end
  local times = {}
  for index = p_head_block, p_tail do
    local b = p_block_at(index)
    if index > p_head_block then
      local prior = p_block_at(index - 1)
      if (prior.before + prior.n) % TWO_32 ~= b.before or (#times > 0 and times[#times] > b.first) then
        return nil
      end
    end
    if not p_times(b, times) then return nil end
  end
  local start, e = p_extent(p_len, p_tail)
  local rest = p_len - (start + e)
  if rest > 0 then
    local free = p_read(start + e, rest)
    if free ~= string.rep('\0', rest) then return nil end
  end
  local offset = p_head_offset()
  if offset == 0 then return times end
  return p_times_from(times, offset + 1, #times)
end

-- Writes what a straight call (check_one, check_kept) changed: the head
-- moved to `rank` in block `head_block` where given, and `bytes` at `at`
-- in tail block `tail` where given; with both in block 0, one range from
-- the head, the bytes between as `start` (the value's first bytes) holds
-- them, where it holds them all.
local function p_write_straight(key, start, rank, head_block, tail, at, bytes)
  if rank and bytes and tail == 0 and at <= #start then
    bytes = struct_pack('<I4I4', rank, 0) .. string.sub(start, 17, at) .. bytes
    at = 8
  elseif rank then
    keyspace.setrange(key, 8, struct_pack('<I4I4', rank, head_block))
  end
  if bytes then keyspace.setrange(key, at, bytes) end
end

-- The one block packed.check_one reads: its table, kept from call to call.
-- (Its metatable is set as a call first reads into it: loading a library
-- sees no setmetatable.)
packed.block = { e = 0, first = 0, l = 0, before = 0, n = 0, top = 0 }

-- One check of one window and cost 1 on a packed log of one block, read
-- whole in `value` (the usual call), taken straight through: the head
-- moved past entries at or below `floor`, and an admitted entry appended
-- into the block, with one SETRANGE; the same checks and the same bytes
-- as open_packed, trim_through, count_above and record. Nil, having
-- written nothing, where the call is not that one (the log empties or
-- grows, the entry is older than the newest, the value is anything else).
-- Otherwise whether it admitted, the count after the call, the newest
-- entry, and for a denial the entry its wait is for (rank len - limit),
-- having kept nothing it read (packed.release is not needed).
packed.check_one = function(key, value, floor, limit, now)
  opened_string = true
  local one = packed.block
  local len = #value
  if len < P_MIN_LEN or len >= READ_WHOLE_AT_MOST or string_byte(value, 5) ~= 2 then return nil end
  local stop = P_HEADER + P_BLOCK
  if stop > len then stop = len end
  -- The parse: kept for these bytes (a denial's, mostly), or made here
  -- with parsing's checks. Its block is read where the call needs it.
  local known = p_parses[value]
  local head_rank, newest, oldest, live, b, offset
  if known then
    if known[2] ~= 0 or known[3] ~= 0 then return nil end
    head_rank, newest, oldest, live = known[1], known[5], known[6], known[7]
  else
    local magic, version, shift, reserved, rank, head_block, tail, reserved_too =
      struct_unpack('<c4BBHI4I4I4I4', value)
    if magic ~= 'SWLc' or version ~= 2 or shift ~= 8 or reserved ~= 0 or reserved_too ~= 0
        or head_block ~= 0 or tail ~= 0 then
      return nil
    end
    b = p_block(value, P_HEADER + 1, stop, one)
    newest = p_head_ends(b, rank, b, -1)
    if not newest then return nil end
    head_rank, offset = rank, (rank - b.before) % TWO_32
    live = b.n - offset
    oldest = live == 1 and newest or offset == 0 and b.first
  end
  -- Trimmed, as trim_through (a floor below 0 trims nothing; one at or
  -- past the newest entry empties the log).
  local moved = false
  if floor >= 0 then
    if floor >= newest then return nil end
    if not (oldest and floor < oldest) then
      if not b then
        b = p_block(value, P_HEADER + 1, stop, one)
        offset = (head_rank - b.before) % TWO_32
      end
      -- (As p_oldest_time.)
      oldest = oldest or live == 1 and newest or p_time_of(b, offset) or MAX_MS
      if floor >= oldest then
        local dropped = p_count_through_block(b, floor) - offset
        if dropped >= live then return nil end
        if dropped > 0 then
          head_rank, offset, live = (head_rank + dropped) % TWO_32, offset + dropped, live - dropped
          oldest, moved = false, true
        end
      end
    end
  end
  if live + 1 > limit then
    local score
    if limit >= 1 then
      -- The entry the wait is for (as score_at).
      local rank = live - limit
      if rank == live - 1 then
        score = newest
      elseif rank == 0 and oldest then
        score = oldest
      else
        if not b then
          b = p_block(value, P_HEADER + 1, stop, one)
          offset = (head_rank - b.before) % TWO_32
        end
        score = offset + rank == 0 and b.first or p_time_of(b, offset + rank) or MAX_MS
      end
    end
    p_let_go(one)
    if moved then
      p_write_straight(key, value, head_rank, 0)
    elseif not known then
      p_remember(value, head_rank, 0, 0, p_blocks_in(len), newest, oldest, live)
    end
    return false, live, newest, score
  end
  if now < newest then return nil end
  -- The append, as record's: in the block, or nothing written.
  if not b then b = p_block(value, P_HEADER + 1, stop, one) end
  -- (p_blocks 1: an entry the block does not take is left to record.)
  p_value, p_len, p_tail, p_head_block, p_blocks = value, len, 0, 0, 1
  local at, bytes, opened = p_append(b, now, 1)
  if not at or opened then return nil end
  -- Nothing read is kept: the call ends without packed.release.
  p_value = false
  p_let_go(one)
  p_write_straight(key, value, moved and head_rank, 0, 0, at, bytes)
  return true, live + 1, now
end

-- Kept head blocks: a speed trick for a log a client keeps calling,
-- where the usual check otherwise scans its head block's high bits
-- twice a call (the oldest entry's select, then the trim's count). The
-- times of the head block a call on `key` read, checked bit by bit when
-- first read (p_times: a block kept is well formed, so its times answer
-- exactly as the module's reads of its bits do), are kept with its
-- bytes as GETRANGE returns them; a later call that reads the same bytes
-- takes the times from here. A call that appends into the head block
-- keeps the bytes it leaves. At most P_KEPT_KEYS_AT_MOST keys are kept,
-- a key replacing its own, and all are dropped every P_KEPT_CALLS_AT_MOST
-- calls, so a server whose calls spread over many keys decodes at most
-- that many blocks that often. Measured by scripts/profile.sh steady:
-- see docs/DEVELOPMENT.md. Removing packed.check_kept (and its call in
-- commands.lua) leaves every reply and byte as they are.
local P_KEPT_KEYS_AT_MOST, P_KEPT_CALLS_AT_MOST = 32, 4096
-- The head block is read with the first 12 bytes of the block after it:
-- the trim reads that block's first time, as the module's search does.
local P_HEAD_READ = P_BLOCK + 12
local p_kept, p_kept_keys, p_kept_calls = {}, 0, 0
local p_kept_block, p_tail_block = {}, {}

-- What the usual check reads of a value first: its header and block 0
-- as a head block is read (a one-block log's value, mostly, whole); its
-- last offset as GETRANGE takes it, P_USUAL_READ - 1 (loading a library
-- sees no tostring).
local P_USUAL_READ, P_USUAL_READ_LAST = P_HEADER + P_HEAD_READ, '291'
-- Header alone: a key kept whose head block was last past block 0 (most
-- calls on a log of more than a block) reads only the header first, for
-- its block 0 is not the call's: those 268 bytes, made a Lua string
-- (which Redis's Lua hashes byte by byte), cost 2,400 of a steady
-- denial's 77,300 instructions at 1,000 entries (docs/DEVELOPMENT.md).
-- A guess either way costs a GETRANGE more, never
-- a different reply. Removing `past_block_0` (reading P_USUAL_READ bytes
-- always) leaves every reply and byte as they are.
local P_HEADER_LAST = '23'

-- How much of `key`'s value the usual check reads first: its length, and
-- its last offset as GETRANGE takes it.
packed.usual_read = function(key)
  local k = p_kept[key]
  if k and k.past_block_0 then return P_HEADER, P_HEADER_LAST end
  return P_USUAL_READ, P_USUAL_READ_LAST
end

-- The block at the start of `str`, bytes read from where it lies (its
-- extent is at most a block's), in `into`.
local function p_block_read(str, into)
  local e = #str
  if e > P_BLOCK then e = P_BLOCK end
  return p_block(str, 1, e, into)
end

-- `n` bytes from offset `at` of the value whose first bytes are `start`
-- (the whole value where `whole`).
local function p_kept_read(key, start, whole, at, n)
  if whole or at + n <= #start then return string.sub(start, at + 1, at + n) end
  return keyspace.getrange(key, at, n)
end

-- The head block `str` of `key` kept, with its `times` (checked), its
-- fields and the next block's first time (false where not read). A block
-- between whose times were kept stays kept (p_between_count_through
-- checks its bytes): the head leaves its block as often as a second
-- window's floor does.
local function p_keep_head(key, str, times, first, before, n, next_first)
  local was = p_kept[key]
  if not was then p_kept_keys = p_kept_keys + 1 end
  local k = { str = str, times = times, first = first, before = before, n = n, next_first = next_first,
    tail = false, newest = false, tail_times = false, past_block_0 = false,
    again = false, again_limit = 0, again_oldest = 0, again_newest = 0, again_head_at = 0, again_tail_at = 0,
    between = was and was.between or false, between_times = was and was.between_times or false,
    between_before = was and was.between_before or 0 }
  p_kept[key] = k
  return k
end

-- What is kept of the head block `str` of `key`, kept here where it is
-- not and there is room; nil where it cannot be (not well formed).
local function p_kept_head(key, str)
  local k = p_kept[key]
  if k and k.str == str then return k end
  if not k and p_kept_keys >= P_KEPT_KEYS_AT_MOST then return nil end
  if #str < P_MIN_EXTENT then return nil end
  local b = p_block_read(str, p_kept_block)
  local times = {}
  local ok = p_times(b, times)
  p_let_go(b)
  if not ok then return nil end
  local next_first = false
  if #str >= P_HEAD_READ then
    local lo, mid, hi = struct_unpack('<I4I2B', str, P_BLOCK + 1)
    next_first = lo + mid * 4294967296 + hi * 281474976710656
  end
  return p_keep_head(key, str, times, b.first, b.before, b.n, next_first)
end

-- The value the straight path searches, and the head rank its block
-- ranks count from: read a probe at a time, with a GETRANGE of a block's
-- first time or rank (as the general path reads them: the same
-- comparisons, so a damaged log is searched alike). A search's first
-- probe of first times reads its block whole and the next block's first
-- time (p_kept_probed, from p_kept_probed_at): on a log a client keeps
-- calling the search's guess is the block found, and that one GETRANGE
-- is its two probes and its read.
local p_kept_key, p_kept_rank = false, 0
local p_kept_probed, p_kept_probed_at = false, 0
local function p_kept_starts_by(index)
  local str, from = p_kept_probed, (index - p_kept_probed_at) * P_BLOCK + 1
  if not str then
    str = keyspace.getrange(p_kept_key, P_HEADER + index * P_BLOCK, P_BLOCK + 7)
    p_kept_probed, p_kept_probed_at, from = str, index, 1
  elseif from < 1 or from + 6 > #str then
    str, from = keyspace.getrange(p_kept_key, P_HEADER + index * P_BLOCK, 7), 1
  end
  local lo, mid, hi = struct_unpack('<I4I2B', str, from)
  return lo + mid * 4294967296 + hi * 281474976710656 <= p_sought
end
local function p_kept_ranked_by(index)
  local before = struct_unpack('<I4', keyspace.getrange(p_kept_key, P_HEADER + index * P_BLOCK + 8, 4))
  return p_rank_from(before, p_kept_rank) <= p_sought
end
-- The bytes of block `index` of p_kept_key, which a search found: the
-- first probe's where it is that block.
local function p_kept_found_bytes(index)
  local str = p_kept_probed
  p_kept_probed = false
  if str and p_kept_probed_at == index then return str end
  return keyspace.getrange(p_kept_key, P_HEADER + index * P_BLOCK, P_BLOCK)
end
-- Block `index` of p_kept_key, which a search found, read (nil where it
-- is not one).
local function p_kept_found(index)
  local str = p_kept_found_bytes(index)
  if #str < P_MIN_EXTENT then return nil end
  return p_block_read(str, p_kept_block)
end

-- How many of `times` (ascending, 1 to `n`) are at or before `at`: the
-- first past it, by bisection.
local function p_count_in(times, n, at)
  local lo, hi = 1, n + 1
  while lo < hi do
    local mid = (lo + hi - (lo + hi) % 2) / 2
    if times[mid] <= at then lo = mid + 1 else hi = mid end
  end
  return lo - 1
end

-- Entries of the tail block `t` (of kept `k`) at or before `at`, counted
-- in its times: decoded once (p_times checked them, so they answer as the
-- module's reads of its bits do) and kept with its bytes, which the kept
-- path's own writes extend. A second window's floor mostly lies in the
-- tail block, and its count there was a scan of the block's bits: 245 of
-- a two-window call's 1,370 Lua VM instructions at 1,000 entries
-- (docs/DEVELOPMENT.md). Nil where the block is not well formed.
local function p_tail_count_through(k, t, at)
  local times = k.tail_times
  if not times then
    times = {}
    if not p_times(t, times) then return nil end
    k.tail_times = times
  end
  return p_count_in(times, #times, at)
end

-- Entries of a block between the head and tail blocks (of kept `k`)
-- whose bytes a search read, `str`, at or before `at`, and the block's
-- rank field: counted in its times, decoded once and kept with its bytes
-- (as p_tail_count_through), which are read again on every call. A second
-- window's floor lies in one such block for many calls on a log a client
-- keeps calling, and a scan of its bits was 250 of a call's 1,410 Lua VM
-- instructions at 10,000 entries. Nil where the block is not well formed
-- (then scanned, as the module reads its bits).
local function p_between_count_through(k, str, at)
  if k.between ~= str then
    if #str < P_MIN_EXTENT then return nil end
    local b = p_block_read(str, p_kept_block)
    local times = {}
    local ok, before = p_times(b, times), b.before
    p_let_go(b)
    if not ok then return nil end
    k.between, k.between_times, k.between_before = str, times, before
  end
  local times = k.between_times
  return p_count_in(times, #times, at), k.between_before
end

-- Live entries at or before `at` (as p_count_through), where the call
-- trimmed to a floor below it: the head block (kept `k`, its live
-- entries from `offset`), the tail block `t` (nil where it is the head
-- block) from `rank`, `live` entries from `oldest` to `newest`. Nil
-- where the module's search would look between them (not this call's).
local function p_kept_count_through(key, k, t, at, rank, offset, head_block, tail, live, oldest, newest)
  if at >= newest then return live end
  if at < oldest then return 0 end
  local through
  local next_first = tail == head_block + 1 and t.first or k.next_first
  if tail ~= head_block and not next_first then return nil end
  if tail == head_block or next_first > at then
    -- As p_count_through_block over the head block's times, which
    -- p_times checked read as the module reads their bits.
    through = p_count_in(k.times, k.n, at) - offset
  elseif t.first <= at then
    through = p_rank_from(t.before, rank) + (p_tail_count_through(k, t, at) or p_count_through_block(t, at))
  else
    -- The module's search of the blocks between (block_through's),
    -- then the block found, read.
    p_kept_key, p_sought, p_kept_probed = key, at, false
    local str = p_kept_found_bytes(p_search_between(head_block, tail, next_first, t.first, p_kept_starts_by))
    local counted, before = p_between_count_through(k, str, at)
    if not counted then
      if #str < P_MIN_EXTENT then return nil end
      local b = p_block_read(str, p_kept_block)
      counted, before = p_count_through_block(b, at), b.before
      p_let_go(b)
    end
    through = p_rank_from(before, rank) + counted
  end
  if through < 0 then return 0 end
  if through > live then return live end
  return through
end

-- The time of the live entry at rank `r` (as the module's time_at), from
-- the head block (kept `k`, its live entries from `offset`) or the tail
-- block `t` (nil where it is the head block), or a block between them
-- found by the module's search of their ranks (block_of_rank), one
-- GETRANGE of a block's rank per probe and one of the block found.
local function p_kept_time_at(key, k, t, r, rank, offset, head_block, tail, live, newest)
  if r == live - 1 then return newest end
  if r == 0 and offset == 0 then return k.first end
  if tail == head_block or offset + r < k.n then return k.times[offset + r + 1] or MAX_MS end
  local b, d = t, p_rank_from(t.before, rank)
  if d > r then
    p_kept_key, p_kept_rank, p_sought, p_kept_probed = key, rank, r, false
    b = p_kept_found(p_search_rank(head_block, tail, p_kept_ranked_by))
    if not b then return nil end
    d = p_rank_from(b.before, rank)
  end
  local time = r - d >= 0 and p_time_of(b, r - d)
  if b ~= t then p_let_go(b) end
  return time or MAX_MS
end

-- Denied again: a client over its limit keeps calling a log that holds
-- exactly its limit, nothing to trim, and the bytes a denial reads (the
-- value's first bytes, the head block read and the tail block) stay as
-- they were. A denial of one window whose wait is for the oldest entry
-- keeps, on the key kept `k`, the first bytes it read and what it found;
-- the next call on the same first bytes with the same limit and a floor
-- below that oldest entry reads the head and tail blocks and, where they
-- are the bytes kept, is the same denial, the header, the blocks' fields
-- and ends not parsed again: 75,000 to 62,700 instructions a call at
-- 1,000 entries (docs/DEVELOPMENT.md). Any other call drops what is kept
-- (check_kept's own writes keep its head block's bytes), and a call whose
-- bytes differ goes on as check_kept, reading them again. Removing
-- p_denied_again (and where check_kept sets `again`) leaves every reply
-- and byte as they are.
local function p_denied_again(key, k, start, whole, floor, limit)
  if k.again ~= start or k.again_limit ~= limit or floor >= k.again_oldest then return nil end
  if p_kept_read(key, start, whole, k.again_head_at, P_HEAD_READ) ~= k.str then return nil end
  local tail_at = k.again_tail_at
  if tail_at > 0 and p_kept_read(key, start, whole, tail_at, P_BLOCK) ~= k.tail then return nil end
  return false, limit, k.again_newest, k.again_oldest
end

-- A one-block log whose block is full, its dead entries at least as
-- many as its live ones (a small window a client keeps calling fills its
-- block with dead entries every few dozen calls): its live entries
-- (`live_times`, in order) coded anew from head rank `rank` into a value
-- of their size and P_MIN_EXTENT bytes more, the entry at `now`
-- appended, and the value written whole, as the module's growth does
-- (record's `recoded`, then its append). Taken straight rather than by
-- the general path, with the block as written kept for the next call:
-- at 10 entries these calls were one in 17 and, with the decode of the
-- call after each, took two fifths of the time (docs/DEVELOPMENT.md).
-- The value written; nil, having written nothing, where the value made
-- does not take the entry.
local function p_recoded_straight(key, live_times, rank, now)
  local value = p_appended(p_coded_anew(live_times, rank, P_MIN_EXTENT), now, 1)
  if value then keyspace.set(key, value) end
  return value
end

-- Behind the newest in a one-block log read whole (`start`), where the
-- entry does not go in place (its block full, mostly of dead entries):
-- the live entries (`times` from `offset` + 1 to `n`) with it coded anew
-- from head rank `rank` into the block's extent, as the module's insert
-- and recode_to_tail do, with the head where the trim `moved` it in the
-- same write. Taken straight rather than by the general path, with the block
-- as written kept for the next call: at 10 entries with every third call
-- behind these calls were one in 33 and, with the decode of the call
-- after each, a sixth of the time (docs/DEVELOPMENT.md). The times of
-- the block written; nil, having written nothing, where the entries take
-- more than the extent (the general path lays them out anew). (A value
-- read whole has its one block: the module's check that the last block
-- made lies within the value holds.)
local function p_inserted_straight(key, start, times, n, offset, rank, moved, now)
  -- After the entries at or before it, as the module's insert puts it.
  local kept = p_times_from(times, offset + 1, n)
  table.insert(kept, p_count_in(kept, #kept, now) + 1, now)
  local blocks = p_encode(p_runs_of(kept, 1, #kept), rank, nil, true, false)
  local b = blocks[1]
  local at, e = p_extent(#start, 0)
  if #blocks ~= 1 or used_bytes(b.n, b.l, b.top) > e then return nil end
  local bytes = p_place(b, e)
  p_write_straight(key, start, moved and rank, 0, 0, at, bytes)
  p_keep_head(key, string.sub(bytes .. string.sub(start, at + e + 1), 1, P_HEAD_READ), kept, kept[1], rank,
    #kept, false)
  return kept
end

-- The usual check (one window, cost 1) on a packed log of any size whose
-- head block is kept or can be: the same reads of the same bytes as
-- open_packed, trim_through, count_above, record and reclaim, taken
-- straight through, with the header, the head block and the tail block
-- each read once. `start` is the value's first bytes, as many as
-- packed.usual_read says (at least the header), all of it where `whole`.
-- Nil, having written nothing, where the call is not that one (the head
-- leaves its block, the log empties or needs a new block, an entry older
-- than the newest, a wait for an entry past the head block, a reclaim,
-- anything not well formed); otherwise as check_one. With a second,
-- narrower window (entries above `narrow_floor`, at most `narrow_limit`)
-- the same, with that window's count after the call as well and, denied
-- there, the entry its wait is for; where a wait would pass 2^53 ms
-- (whose order only the general path compares exactly), nil.
packed.check_kept = function(key, start, whole, floor, limit, now, narrow_floor, narrow_limit)
  local len = #start
  if len < (whole and P_MIN_LEN or P_HEADER) or string_byte(start, 5) ~= 2 then return nil end
  p_kept_calls = p_kept_calls + 1
  if p_kept_calls >= P_KEPT_CALLS_AT_MOST then p_kept, p_kept_keys, p_kept_calls = {}, 0, 0 end
  -- A key not kept, with no room to keep it, is check_one's or the
  -- general path's, before any read.
  local kept = p_kept[key]
  if not kept and p_kept_keys >= P_KEPT_KEYS_AT_MOST then return nil end
  if kept and kept.again then
    if not narrow_floor then
      local allowed, live, newest, score = p_denied_again(key, kept, start, whole, floor, limit)
      if allowed ~= nil then return allowed, live, newest, score end
    end
    kept.again = false
  end
  local magic, version, shift, reserved, rank, head_block, tail, reserved_too =
    struct_unpack('<c4BBHI4I4I4I4', start)
  if magic ~= 'SWLc' or version ~= 2 or shift ~= 8 or reserved ~= 0 or reserved_too ~= 0
      or head_block > tail then
    return nil
  end
  -- The blocks the value has room for: all of them where it was read
  -- whole, otherwise at least the tail block's.
  local blocks = whole and p_blocks_in(len) or tail + 1
  if tail >= blocks then return nil end
  local k = p_kept_head(key, p_kept_read(key, start, whole, P_HEADER + head_block * P_BLOCK, P_HEAD_READ))
  if not k then return nil end
  k.past_block_0 = head_block ~= 0
  opened_string = true
  local times, hn = k.times, k.n
  local offset = (rank - k.before) % TWO_32
  if offset >= hn then return nil end
  -- The tail block: its fields, and its newest entry's time (kept with
  -- the bytes it was read from, or that this library wrote last).
  local t, newest, live, tstr
  if tail == head_block then
    newest, live = times[hn], hn - offset
  else
    tstr = p_kept_read(key, start, whole, P_HEADER + tail * P_BLOCK, P_BLOCK)
    if #tstr < P_MIN_EXTENT then return nil end
    t = p_block_read(tstr, p_tail_block)
    if k.tail == tstr then
      newest = k.newest
    else
      newest = p_check_ends(t)
      k.tail, k.newest, k.tail_times = tstr, newest, false
    end
    -- As p_head_ends.
    local past = (t.before - rank) % TWO_32 - (hn - offset)
    if not newest or t.first < k.first or past < 0 or past > (tail - head_block - 1) * P_MOST_PER_BLOCK then
      p_let_go(t)
      return nil
    end
    live = (t.before + t.n - rank) % TWO_32
  end
  local oldest = live == 1 and newest or times[offset + 1]
  -- Trimmed, as trim_through: within the head block, or nothing written.
  local moved = false
  if floor >= 0 and floor >= oldest then
    if floor >= newest then return nil end
    local next_first = tail == head_block + 1 and t.first or k.next_first
    if tail ~= head_block and not (next_first and next_first > floor) then return nil end
    local i = offset + 2
    while i <= hn and times[i] <= floor do i = i + 1 end
    -- (Past the head block's last entry the head would leave it.)
    if i > hn then return nil end
    local dropped = i - 1 - offset
    rank, offset, live, moved = (rank + dropped) % TWO_32, i - 1, live - dropped, true
    oldest = live == 1 and newest or times[i]
  end
  local allowed = live + 1 <= limit
  local narrow, narrow_fits
  if narrow_floor then
    -- The narrow window's count, as counts takes it after the trim.
    narrow = live
    if narrow_floor >= 0 and narrow_floor > floor then
      local through = p_kept_count_through(key, k, t, narrow_floor, rank, offset, head_block, tail, live, oldest, newest)
      if not through then return nil end
      narrow = live - through
    end
    narrow_fits = narrow + 1 <= narrow_limit
  end
  local after = (allowed and narrow_fits ~= false) and live + 1 or live
  -- As reclaim: a call that would copy or recode the value is not this one.
  if tail == head_block + 1 and offset >= after then return nil end
  if head_block * 2 >= blocks then return nil end
  if not allowed or narrow_fits == false then
    -- The entries the waits are for (as retry_after's score_at), where a
    -- window's limit leaves one to wait for.
    local score, narrow_score
    if not allowed and limit >= 1 then
      -- (Mostly the oldest, as the wait of a log at its limit.)
      local r = live - limit
      score = r == 0 and live > 1 and oldest or p_kept_time_at(key, k, t, r, rank, offset, head_block, tail, live, newest)
      if not score or (narrow_floor and math.ceil(score) - floor > MAX_MS) then return nil end
    end
    if narrow_fits == false and narrow_limit >= 1 then
      narrow_score = p_kept_time_at(key, k, t, live - narrow_limit, rank, offset, head_block, tail, live, newest)
      if not narrow_score or math.ceil(narrow_score) - narrow_floor > MAX_MS then return nil end
    end
    if moved then
      p_write_straight(key, start, rank, head_block)
    elseif live == limit and live > 1 and not narrow_floor then
      -- (The wait is for the oldest: see p_denied_again.)
      k.again, k.again_limit, k.again_oldest, k.again_newest = start, limit, oldest, newest
      k.again_head_at, k.again_tail_at = P_HEADER + head_block * P_BLOCK, t and P_HEADER + tail * P_BLOCK or 0
    end
    return false, live, newest, score, narrow, narrow_score
  end
  local str = tstr or k.str
  if not t then t = p_block_read(str, p_tail_block) end
  if now < newest then
    -- Behind the newest (servers whose clocks differ a little): into the
    -- tail block in place, as record's insert_in_place puts it there, or
    -- nothing written. (The entries through now are counted as
    -- p_count_through counts them: none before the oldest, and in the
    -- tail block where p_block_through finds it: the block after the head
    -- block starts no later than now, and so does the tail block.)
    local in_tail = tail == head_block or tail == head_block + 1
      or (k.next_first and k.next_first <= now)
    -- (The block's entries through now counted in its kept times, where
    -- a scan of its bits was most of a call behind: see
    -- p_tail_count_through.)
    local place = in_tail and now >= oldest and now >= t.first
      and (tail == head_block and p_count_in(times, hn, now) or p_tail_count_through(k, t, now))
    if not place or place >= t.n or place <= (tail == head_block and offset or 0)
        or not p_insert_bits(t, place, now) then
      p_let_go(t)
      -- (One block: where the module's insert_in_place does not take it,
      -- its insert codes the live entries anew.)
      if not (whole and tail == head_block
          and p_inserted_straight(key, start, times, hn, offset, rank, moved, now)) then
        return nil
      end
      return true, live + 1, newest, nil, narrow and narrow + 1
    end
    local e = t.e
    local bytes = string_char(unpack(t.t, 13, e))
    p_let_go(t)
    local written = p_spliced(str, 12, bytes)
    if tail == head_block then
      table.insert(times, place + 1, now)
      k.n, k.str = hn + 1, written
    else
      k.tail, k.newest = written, newest
      if k.tail_times then table.insert(k.tail_times, place + 1, now) end
    end
    p_write_straight(key, start, moved and rank, head_block, tail, P_HEADER + tail * P_BLOCK + 12, bytes)
    return true, live + 1, newest, nil, narrow and narrow + 1
  end
  -- The append, as record's: into the tail block, or nothing written.
  p_value, p_len, p_tail, p_head_block, p_blocks = false, 0, tail, head_block, tail + 1
  local at, bytes, opened = p_append(t, now, 1)
  if not at and tail ~= head_block then
    -- The tail block full: the block after it opened, where the value
    -- has it free (as record's append; its extent from the value's
    -- length), rather than by the general path (at 1,000 entries one call
    -- in 150, at 50 us where a call takes 10).
    p_len = whole and len or keyspace.strlen(key)
    p_blocks = p_blocks_in(p_len)
    at, bytes, opened = p_append(t, now, 1)
  end
  p_let_go(t)
  if opened then
    -- The head (where the trim moved it) and the new tail in one write,
    -- then the block.
    if moved then
      keyspace.setrange(key, 8, struct_pack('<I4I4I4', rank, head_block, opened))
    else
      keyspace.setrange(key, 16, struct_pack('<I4', opened))
    end
    keyspace.setrange(key, at, bytes)
    k.tail, k.newest, k.tail_times = bytes, now, { now }
    return true, live + 1, now, nil, narrow and narrow + 1
  end
  if not at and whole and tail == head_block and offset >= live then
    -- Read whole, the value has no block after its one (a longer one may
    -- have a free block, which the module opens, coding the log anew
    -- only when the call ends: the general path's). (The kept times were
    -- checked in order: see p_times.)
    local kept = p_times_from(times, offset + 1, hn)
    local value = p_recoded_straight(key, kept, rank, now)
    if not value then return nil end
    kept[#kept + 1] = now
    p_keep_head(key, string.sub(value, P_HEADER + 1, P_HEADER + P_HEAD_READ), kept, kept[1], rank, #kept, false)
    return true, live + 1, now, nil, narrow and narrow + 1
  end
  if not at or opened then return nil end
  local within = at - P_HEADER - tail * P_BLOCK
  local written = p_spliced(str, within, bytes)
  if tail == head_block then
    -- The head block as written: its times and bytes kept, unless its
    -- entries were laid out anew (an `l` from the gap, written from byte
    -- 7).
    if within ~= 7 then
      times[hn + 1], k.n, k.str = now, hn + 1, written
    else
      p_kept[key], p_kept_keys = nil, p_kept_keys - 1
    end
  else
    k.tail, k.newest = written, now
    if k.tail_times then k.tail_times[#k.tail_times + 1] = now end
  end
  p_write_straight(key, start, moved and rank, head_block, tail, at, bytes)
  return true, live + 1, now, nil, narrow and narrow + 1
end

packed.log = open_packed
-- The packed log's methods, and whether its key holds a log.
packed.methods = Packed
packed.exists = function() return p_exists end
packed.release = function()
  p_value, p_start, p_tables, p_heads, p_region = false, false, false, false, false
  p_let_go(packed.block)
end

return packed
end)()

--[[ ======== commands: lua/commands.lua (mirrors src/commands.rs) ======== ]]

local commands = (function()
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
end)()

--[[ ======== lib: lua/lib.lua (mirrors src/lib.rs) ======== ]]

-- The functions, as src/lib.rs registers the commands.
redis.register_function { function_name = 'swl_check', callback = commands.check }
redis.register_function { function_name = 'swl_peek', callback = commands.peek, flags = { 'no-writes' } }
-- A refund only frees memory, so it runs when the server is out of it.
redis.register_function { function_name = 'swl_refund', callback = commands.refund, flags = { 'allow-oom' } }
redis.register_function { function_name = 'swl_entries', callback = commands.entries, flags = { 'no-writes' } }
-- The release this library is part of (Cargo.toml's version): FCALL_RO swl_version 0.
local VERSION = '0.4.0'
redis.register_function { function_name = 'swl_version', callback = function() return VERSION end, flags = { 'no-writes' } }
