#!lua name=swl
--[[
redis-swl without the module: a Redis Functions library (Redis 7+) with the
same arguments, replies, errors and key contents as SWL.CHECK, SWL.PEEK,
SWL.REFUND and SWL.ENTRIES, for servers that cannot load modules. It reads and writes both
encodings of a log, sorted sets and compact logs, as the module does.

  redis-cli FUNCTION LOAD REPLACE "$(cat scripts/swl.lua)"
  FCALL swl_check   1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [PENALIZE]
  FCALL swl_peek    1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
  FCALL swl_refund  1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
  FCALL swl_entries 1 key

A compact log is left with the same bytes as the module leaves; in a sorted
set only the members of the entries differ from the module's (both are
random 14-digit numbers). It is slower: see "Choosing" in the README.
]]

-- How a new log is stored, as the module's swl.encoding: 'zset' (a sorted
-- set) or 'compact' (a compact log string). Existing keys keep theirs.
-- Change it by loading the library with this line edited (README).
local ENCODING = 'zset'

local MAX_MS = 9007199254740991
local MAX_COST = 100000
-- The wait for an entry that never leaves its window (2^54, exact as a double).
local NEVER_MS = 18014398509481984
local TWO_32 = 4294967296
-- The high half of 2^53, the first value past MAX_MS + 1.
local HIGH_OF_2_53 = 2097152

local ERR_WINDOW = 'ERR window_ms must be an integer from 1 to 9007199254740991'
local ERR_LIMIT = 'ERR limit must be an integer from 0 to 9007199254740991'
local ERR_NOW = 'ERR now_ms must be an integer from 0 to 9007199254740991, or *'
local ERR_COST = 'ERR cost must be an integer from 1 to 100000'
local ERR_SYNTAX = 'ERR syntax error'
local ERR_WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local ERR_ONE_KEY = 'ERR the function takes exactly one key'

if ENCODING ~= 'zset' and ENCODING ~= 'compact' then
  error("ENCODING must be 'zset' or 'compact'")
end

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

--[[ The log as a sorted set: one member per entry, scored by its time. ]]

-- Random-looking 14-digit members from the clock, unique within the key:
-- consecutive numbers, added up to ZADD_AT_MOST at a time with ZADD NX,
-- and more for any that clashed with a member already there.
local ZADD_AT_MOST = 500
local function add_members(key, at, count, clock)
  local member = 10000000000000 + ((clock[1] % 90000) * 1000000 + clock[2]) * 1000
  local score = num(at)
  while count > 0 do
    local n = math.min(count, ZADD_AT_MOST)
    local args = {}
    for i = 0, n - 1 do
      args[2 * i + 1] = score
      args[2 * i + 2] = num(member + i)
    end
    count = count - redis.call('ZADD', key, 'NX', unpack(args))
    member = member + n
  end
end

-- ZCOUNT and ZRANGE by rank are O(log N).
local function zset_log(key, clock)
  local log = {}
  function log.len() return redis.call('ZCARD', key) end
  function log.count_above(floor)
    return redis.call('ZCOUNT', key, '(' .. num(floor), '+inf')
  end
  function log.score_at(rank)
    if rank < 0 then return nil end
    local entry = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    return entry[2] and tonumber(entry[2])
  end
  function log.trim_through(floor)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', num(floor))
  end
  function log.record(at, count) add_members(key, at, count, clock) end
  function log.cap_to(max_entries)
    local excess = redis.call('ZCARD', key) - max_entries
    if excess > 0 then redis.call('ZREMRANGEBYRANK', key, 0, excess - 1) end
  end
  function log.drop_newest(count)
    redis.call('ZREMRANGEBYRANK', key, -count, -1)
  end
  -- A sorted set is never found damaged.
  function log.finish() return true end
  -- Every entry as SWL.ENTRIES replies it: integers where whole, as ZRANGE
  -- shows a score otherwise (fractional, infinite).
  function log.entries()
    local times = {}
    local scores = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 2, #scores, 2 do
      local score = tonumber(scores[i])
      local whole = score == math.floor(score) and math.abs(score) < 9.2e18
      times[#times + 1] = whole and score or scores[i]
    end
    return times
  end
  return log
end

--[[ The compact log: a string of fixed-width slots, byte for byte as the
module's src/compact.rs reads and writes it (its header comment has the
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
local READ_WHOLE_AT_MOST = 1024
-- Slots are read in blocks of this many: a binary search's last steps
-- fall in one block, and its first ones in blocks other searches read.
local BLOCK_SLOTS = 64
-- Slots decoded or encoded per call of struct.unpack or struct.pack.
local CHUNK = 128

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
  if width == 4 then return struct.pack('<I4', stored) end
  return struct.pack('<I4I4', halves_of(stored))
end

-- The `count` slots at the start of `bytes` as numbers.
local function decode_slots(bytes, width, count)
  local slots, at, done = {}, 1, 0
  local halves = width / 4
  while done < count do
    local n = math.min(CHUNK, count - done)
    local parts = { struct.unpack('<' .. string.rep('I4', n * halves), bytes, at) }
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
    out[#out + 1] = struct.pack('<' .. string.rep('I4', #values), unpack(values))
    at = at + n
  end
end

-- jemalloc's size class for n bytes: multiples of 16 up to 128, then four
-- evenly spaced classes per power of two.
local function size_class(n)
  if n <= 128 then return math.ceil(n / 16) * 16 end
  local power = 1
  while power < n do power = power * 2 end
  local spacing = power / 8
  return math.ceil(n / spacing) * spacing
end

-- The string header (3, 5 or 9 bytes by length) and its NUL.
local function string_overhead(len)
  if len <= 255 then return 4 elseif len <= 65535 then return 6 end
  return 10
end

-- The number of slots, at least `wanted`, whose value fills the memory
-- Redis allocates for it anyway (as the module sizes it).
local function slots_filling_allocation(wanted, width)
  wanted = math.max(wanted, MIN_SLOTS)
  local len = HEADER_LEN + wanted * width
  local block = size_class(len + string_overhead(len))
  local usable = block - string_overhead(block)
  return math.max(math.floor((usable - HEADER_LEN) / width), wanted)
end

-- A new value holding `times` (ascending) with, if `insert` is given,
-- insert.count entries at insert.time placed after the insert.after
-- first of them: based at the oldest, in the narrowest width that holds
-- them, with free slots for an eighth more (at least `spare`).
local function encode(times, spare, insert)
  local added = insert and insert.count or 0
  local after = insert and insert.after or #times
  local n = #times + added
  local oldest = (insert and after == 0) and insert.time or times[1]
  local newest = (insert and after == #times) and insert.time or times[#times]
  local base = oldest or 0
  local span = newest and (newest - base + 1) or 0
  local width = span <= TWO_32 - 1 and 4 or 8
  local slots = slots_filling_allocation(n + math.max(math.floor(n / 8), spare, 4), width)
  local out = { 'SWLc\1', string.char(width), '\0\0',
    struct.pack('<I4I4', halves_of(base)), string.rep('\0', 8) }
  encode_slots(times, 1, after, base, width, out)
  if added > 0 then
    out[#out + 1] = string.rep(pack_slot(insert.time - base + 1, width), added)
  end
  encode_slots(times, after + 1, #times, base, width, out)
  out[#out + 1] = string.rep('\0', (slots - n) * width)
  return table.concat(out)
end

-- The compact log in `key`, which holds one (`exists`) or nothing.
local function compact_log(key, exists)
  local log = {}
  -- What has been read of the value, kept equal to the stored bytes
  -- through every write: its length, the whole value (when small or
  -- written here), its header, and blocks of slots.
  local len, whole, header, blocks
  -- The value parsed as a log, again after every change (as the module
  -- parses it), from what has been read.
  local layout, parsed
  -- A head moved but not yet written: a later change of the call may find
  -- the value damaged, and the call must then leave it as it was.
  local head_pending
  -- A change found bytes that are not a compact log (slots another writer
  -- changed, which a call reads only in part): nothing more is written.
  local damaged = false

  local function reread() len, whole, header, blocks = nil, nil, nil, {} end
  local function reparse() layout, parsed = nil, false end
  reread()
  reparse()

  -- `n` bytes from offset `at` (0-based).
  local function read(at, n)
    if whole then return string.sub(whole, at + 1, at + n) end
    return redis.call('GETRANGE', key, at, at + n - 1)
  end

  -- The value's length; a value of at most READ_WHOLE_AT_MOST bytes is
  -- read whole by the same call.
  local function value_len()
    if not len then
      local start = redis.call('GETRANGE', key, 0, READ_WHOLE_AT_MOST - 1)
      if #start < READ_WHOLE_AT_MOST then
        len, whole = #start, start
      else
        len = redis.call('STRLEN', key)
        header = string.sub(start, 1, HEADER_LEN)
        if len == #start then whole = start end
      end
    end
    return len
  end

  -- The slot at `index` as stored; 0 past the end. Slots are read a
  -- block at a time, and decoded one at a time.
  local function raw(index)
    if index >= layout.capacity then return 0 end
    local width = layout.width
    local bytes, at
    if whole then
      bytes, at = whole, HEADER_LEN + index * width + 1
    else
      local block = math.floor(index / BLOCK_SLOTS)
      bytes = blocks[block]
      if not bytes then
        local first = block * BLOCK_SLOTS
        local count = math.min(BLOCK_SLOTS, layout.capacity - first)
        bytes = read(HEADER_LEN + first * width, count * width)
        blocks[block] = bytes
      end
      at = (index % BLOCK_SLOTS) * width + 1
    end
    if width == 4 then return (struct.unpack('<I4', bytes, at)) end
    local low, high = struct.unpack('<I4I4', bytes, at)
    return wide_slot(low, high)
  end

  -- Makes what was read show `bytes` at `at`, as the value will hold them.
  local function overlay(at, bytes)
    local stop = at + #bytes
    local function splice(old)
      return string.sub(old, 1, at) .. bytes .. string.sub(old, stop + 1)
    end
    if whole then whole = splice(whole) end
    if header and at < HEADER_LEN then
      header = string.sub(splice(header), 1, HEADER_LEN)
    end
    if not whole and stop > HEADER_LEN then
      local slot_bytes = layout.width * BLOCK_SLOTS
      local first = math.floor((math.max(at, HEADER_LEN) - HEADER_LEN) / slot_bytes)
      for block = first, math.floor((stop - 1 - HEADER_LEN) / slot_bytes) do
        blocks[block] = nil
      end
    end
    reparse()
  end

  local function write_pending_head()
    if head_pending then
      redis.call('SETRANGE', key, HEAD_AT, head_pending)
      head_pending = nil
    end
  end

  -- Writes `bytes` at `at`, within the value, and keeps what was read
  -- equal to what is stored.
  local function write(at, bytes)
    write_pending_head()
    redis.call('SETRANGE', key, at, bytes)
    overlay(at, bytes)
  end

  -- The whole value written anew, keeping the key's expiry.
  local function store(value)
    head_pending = nil
    redis.call('SET', key, value, 'KEEPTTL')
    exists = true
    reread()
    len, whole = #value, value
    reparse()
  end

  local function unlink()
    head_pending = nil
    redis.call('UNLINK', key)
    exists = false
    reread()
    reparse()
  end

  -- The time of the slot at `index`, if it holds one.
  local function time(index)
    local value = raw(index)
    if value == 0 or value - 1 > MAX_MS - layout.base then return nil end
    return layout.base + value - 1
  end

  -- Checks the header and the live range in O(log N), as the module does
  -- on every call; nil for bytes that are not a compact log.
  local function parse()
    local len = value_len()
    if len < MIN_LEN then return nil end
    header = header or read(0, HEADER_LEN)
    local width = string.byte(header, 6)
    if string.sub(header, 1, 5) ~= 'SWLc\1' or (width ~= 4 and width ~= 8)
        or string.sub(header, 7, 8) ~= '\0\0' or string.sub(header, 21, 24) ~= '\0\0\0\0'
        or (len - HEADER_LEN) % width ~= 0 then
      return nil
    end
    local base_low, base_high, head = struct.unpack('<I4I4I4', header, 9)
    if base_high >= HIGH_OF_2_53 then return nil end
    layout = { width = width, base = base_high * TWO_32 + base_low, head = head,
      capacity = (len - HEADER_LEN) / width }
    if head > layout.capacity then return nil end
    layout.stop = head + partition_point(layout.capacity - head,
      function(i) return raw(head + i) ~= 0 end)
    if layout.stop > head then
      local oldest, newest = time(head), time(layout.stop - 1)
      if not oldest or not newest or oldest > newest then return nil end
    end
    return layout
  end

  -- The value as a log, parsed once per change; nil for none.
  local function current()
    if not parsed then
      parsed = true
      layout = exists and parse() or nil
    end
    return layout
  end

  -- Whether a change may go ahead on an existing log: not after one found
  -- the value damaged, and not on bytes that no longer parse (which marks
  -- them damaged).
  local function changeable()
    if damaged or not exists then return false end
    if not current() then damaged = true end
    return not damaged
  end

  local function live() return layout.stop - layout.head end

  -- Live entries at or before `t`: a binary search.
  local function count_through(t)
    local limit = t + 1 - layout.base
    if limit < 0 then return 0 end
    return partition_point(live(), function(rank) return raw(layout.head + rank) <= limit end)
  end

  local function count_above(floor)
    if floor < 0 then return live() end
    return live() - count_through(floor)
  end

  -- The entries from slot `head` to the end of the live ones, each slot
  -- checked, and the free slots after them checked to be free; nil if
  -- any is not.
  local function entries_from(head)
    local width, stop = layout.width, layout.stop
    local bytes = read(HEADER_LEN + head * width, (layout.capacity - head) * width)
    local stored = decode_slots(bytes, width, stop - head)
    local times, base = {}, layout.base
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

  -- Moves the head to the slot `pick` names: an emptied log goes, a dead
  -- prefix of more than half the value is reclaimed by writing the live
  -- entries anew, otherwise only the head changes.
  local function move_head(pick)
    if not changeable() then return end
    local head = pick()
    if head == layout.head then return end
    if head == layout.stop then
      unlink()
    elseif head * 2 > layout.capacity then
      local times = entries_from(head)
      if times then store(encode(times, 0)) else damaged = true end
    else
      head_pending = struct.pack('<I4', head)
      overlay(HEAD_AT, head_pending)
    end
  end

  function log.len() return current() and live() or 0 end

  function log.count_above(floor)
    return current() and count_above(floor) or 0
  end

  function log.score_at(rank)
    if not current() or rank < 0 or rank >= live() then return nil end
    return time(layout.head + rank) or MAX_MS
  end

  function log.trim_through(floor)
    move_head(function() return layout.stop - count_above(floor) end)
  end

  function log.cap_to(max_entries)
    move_head(function() return layout.stop - math.min(live(), max_entries) end)
  end

  -- An entry no older than the newest goes into free slots; an older one
  -- to its sorted place, moving the newer slots up. Without room, before
  -- the base or past the slot width, the value is written anew with room
  -- for an eighth more.
  function log.record(at, count)
    if not exists and not damaged then
      store(encode({}, 0, { time = at, count = count, after = 0 }))
      return
    end
    if not changeable() then return end
    local width = layout.width
    local stored = at + 1 - layout.base
    local fits = stored >= 1 and (width == 8 or stored <= TWO_32 - 1)
    if not fits or layout.capacity - layout.stop < count then
      local times = entries_from(layout.head)
      if not times then
        damaged = true
        return
      end
      local after = partition_point(#times, function(i) return times[i + 1] <= at end)
      store(encode(times, count, { time = at, count = count, after = after }))
      return
    end
    local first = layout.head + count_through(at)
    local from = HEADER_LEN + first * width
    local moved = ''
    if first < layout.stop then moved = read(from, (layout.stop - first) * width) end
    write(from, string.rep(pack_slot(stored, width), count) .. moved)
  end

  -- The `count` newest entries go: their slots are freed; all of them,
  -- the key.
  function log.drop_newest(count)
    if not changeable() then return end
    local n = live()
    if n == 0 then return end
    if count >= n then
      unlink()
    else
      local width = layout.width
      write(HEADER_LEN + (layout.stop - count) * width, string.rep('\0', count * width))
    end
  end

  -- Ends the call's changes: false if one found the value damaged, which
  -- is then left as it was; otherwise a moved head is written.
  function log.finish()
    if damaged then return false end
    write_pending_head()
    return true
  end

  -- Every entry, each slot checked; nil if the value is not a compact log.
  function log.entries()
    if not exists then return {} end
    if not current() then return nil end
    return entries_from(layout.head)
  end

  -- Whether a string key holds a well-formed log, as far as a call checks.
  function log.is_well_formed() return not exists or current() ~= nil end

  return log
end

--[[ The decision, the same for both encodings: src/window.rs in Lua. ]]

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

-- Each window's entries above its floor.
local function counts(log, windows, now)
  local result = {}
  for i, w in ipairs(windows) do
    result[i] = log.count_above(now - w.ms)
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
local function retry_after(log, len, w, now, cost)
  if cost > w.limit then return -1 end
  local score = log.score_at(len - (w.limit - cost + 1))
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
local function verdict(log, windows, counts, now, cost, allowed, pending)
  local len = log.len()
  local binding
  for i, w in ipairs(windows) do
    local count = counts[i]
    local reply = { allowed and 1 or 0, w.limit, math.max(0, w.limit - count), -1, 0, w.ms }
    if allowed then
      if not binding or reply[3] < binding[3] then binding = reply end
    elseif count + cost > w.limit then
      reply[4] = retry_after(log, len, w, now, cost)
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
  local newest = log.score_at(len - 1)
  if newest and not (newest > now - wide.ms) then newest = nil end
  if pending and not (newest and newest > now) then newest = now end
  binding[5] = newest and ms_until_left(newest, wide.ms, now) or 0
  return binding
end

local function server_clock()
  local t = redis.call('TIME')
  local seconds, micros = tonumber(t[1]), tonumber(t[2])
  return seconds * 1000 + math.floor(micros / 1000), { seconds, micros }
end

-- The log in the one key: a sorted set, a compact log, or (no key) as
-- ENCODING says; or an error reply.
local function open_log(keys, clock)
  if #keys ~= 1 then return nil, redis.error_reply(ERR_ONE_KEY) end
  local key = keys[1]
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'zset' or (kind == 'none' and ENCODING == 'zset') then
    return zset_log(key, clock)
  end
  if kind == 'string' or kind == 'none' then
    local log = compact_log(key, kind == 'string')
    if log.is_well_formed() then return log end
  end
  return nil, redis.error_reply(ERR_WRONGTYPE)
end

-- The request and its log, or an error reply: arguments first, then the
-- key's type.
local function prepare(keys, args, command, clock)
  local request, err = parse(args, command)
  if not request then return nil, redis.error_reply(err) end
  local log, failed = open_log(keys, clock)
  if not log then return nil, failed end
  return request, log
end

local function swl_check(keys, args)
  local clock_ms, clock = server_clock()
  local request, log = prepare(keys, args, 'swl.check', clock)
  if not request then return log end
  local key = keys[1]
  local now = request.now == '*' and clock_ms or request.now
  local windows, cost = request.windows, request.cost
  -- A penalty may empty the log and write it anew, which drops the key's
  -- expiry; a denial must still not shorten it.
  local expiry_before = request.penalize and redis.call('PEXPIRETIME', key)

  log.trim_through(now - widest(windows).ms)
  local before = counts(log, windows, now)
  local allowed = admits(windows, before, cost)
  local recorded, cap = 0, nil
  if allowed then
    recorded = cost
  elseif request.penalize then
    -- Record no more than the cap keeps; entries after now outrank them.
    cap = largest_limit(windows)
    recorded = math.min(cost, math.max(0, cap - log.count_above(now)))
  end
  -- Capped first, keeping room for what is recorded: the same entries as
  -- recording then capping, as the module does it.
  if cap then log.cap_to(cap - recorded) end
  if recorded > 0 then log.record(now, recorded) end
  if not log.finish() then return redis.error_reply(ERR_WRONGTYPE) end
  local reply = verdict(log, windows, counts_after(before, recorded, cap), now, cost, allowed, false)
  -- The key lives at least until its newest entry leaves the window: the
  -- call's clock + reset_after_ms. An admit sets that; a denial only
  -- lengthens a shorter expiry (or repairs a missing one). It is set
  -- relative to the clock now: an absolute time that has just passed would
  -- delete the key at once (it lands 1 ms late only if a millisecond ticks
  -- between TIME and PEXPIRE). Redis propagates PEXPIRE as PEXPIREAT.
  -- PEXPIRETIME is -2 for no key (the log emptied), -1 for no expiry.
  local current = redis.call('PEXPIRETIME', key)
  local kept = expiry_before or current
  if current ~= -2 and (allowed or kept < 0 or kept < clock_ms + reply[5]) then
    local ttl = reply[5] - (server_clock() - clock_ms)
    redis.call('PEXPIRE', key, num(math.max(1, ttl)))
  elseif current ~= -2 and current ~= kept then
    redis.call('PEXPIREAT', key, num(kept))
  end
  return reply
end

-- What a check would reply now, changing nothing.
local function peek_reply(log, windows, now, cost)
  local before = counts(log, windows, now)
  local allowed = admits(windows, before, cost)
  local after = counts_after(before, allowed and cost or 0, nil)
  return verdict(log, windows, after, now, cost, allowed, allowed)
end

local function swl_peek(keys, args)
  local clock_ms = server_clock()
  local request, log = prepare(keys, args, 'swl.peek')
  if not request then return log end
  local now = request.now == '*' and clock_ms or request.now
  return peek_reply(log, request.windows, now, request.cost)
end

local function swl_refund(keys, args)
  local clock_ms, clock = server_clock()
  local request, log = prepare(keys, args, 'swl.refund', clock)
  if not request then return log end
  local key = keys[1]
  local now = request.now == '*' and clock_ms or request.now
  local windows, cost = request.windows, request.cost
  local wide = widest(windows)
  log.trim_through(now - wide.ms)
  log.drop_newest(cost)
  if not log.finish() then return redis.error_reply(ERR_WRONGTYPE) end
  -- As after an admitted check: the key goes when its newest entry leaves
  -- the window (the reply's reset counts a request not recorded).
  if redis.call('PEXPIRETIME', key) ~= -2 then
    local newest = log.score_at(log.len() - 1)
    local lives = (newest and newest > now - wide.ms) and ms_until_left(newest, wide.ms, now) or 0
    local ttl = lives - (server_clock() - clock_ms)
    redis.call('PEXPIRE', key, num(math.max(1, ttl)))
  end
  return peek_reply(log, windows, now, cost)
end

local function swl_entries(keys, args)
  if #args ~= 0 then
    return redis.error_reply("ERR wrong number of arguments for 'swl.entries' command")
  end
  local log, failed = open_log(keys)
  if not log then return failed end
  local times = log.entries()
  if not times then return redis.error_reply(ERR_WRONGTYPE) end
  return times
end

redis.register_function { function_name = 'swl_check', callback = swl_check }
redis.register_function { function_name = 'swl_peek', callback = swl_peek, flags = { 'no-writes' } }
-- A refund only frees memory, so it runs when the server is out of it.
redis.register_function { function_name = 'swl_refund', callback = swl_refund, flags = { 'allow-oom' } }
redis.register_function { function_name = 'swl_entries', callback = swl_entries, flags = { 'no-writes' } }
