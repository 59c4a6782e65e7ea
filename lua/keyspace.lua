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
