-- The commands that read and write a compact log's string, as
-- src/redis/compact.rs issues them: the codecs (compact, packed) reach the
-- key through these alone, and issue none themselves. Offsets are
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
