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
