
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
