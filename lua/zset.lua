
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
