-- Test only: the compact codecs' operations one at a time, for the codec
-- vectors (tests/codec_vectors.rs, tests/vectors/codec.json). Appended to
-- the library's modules by scripts/build-library.sh OUT tests/codec.lua.
--
--   FCALL swl_codec 1 key format op [args]   'ok' or 'error'
--
-- op is record (time, count), trim_through (floor), cap_to (max),
-- drop_newest (count) or reclaim, on the log in key: a string is read in
-- the version its version byte names (as src/format.rs dispatches), no
-- key as a new log in `format`. Each runs as a call runs it: opened,
-- changed, finished.
redis.register_function { function_name = 'swl_codec', callback = function(keys, args)
  if not redis_call then bind_globals() end
  local key, format, op = keys[1], args[1], args[2]
  local a, b = tonumber(args[3]), tonumber(args[4])
  local start = redis_call('GETRANGE', key, '0', READ_WHOLE_LAST)
  local exists = start ~= ''
  local codec
  if exists then
    codec = string.byte(start, 5) == 2 and packed or compact
  else
    codec = format == '2' and packed or compact
  end
  local log = codec.log(key, exists, exists and start or nil)
  local ok = log ~= nil
  if ok then
    if op == 'record' then
      log:record(a, b)
    elseif op == 'trim_through' then
      log:trim_through(a)
    elseif op == 'cap_to' then
      log:cap_to(a)
    elseif op == 'drop_newest' then
      log:drop_newest(a)
    elseif op ~= 'reclaim' then
      return redis.error_reply('ERR unknown op ' .. op)
    end
    ok = log:finish()
    if ok and op == 'reclaim' then log:reclaim() end
  end
  compact.release()
  packed.release()
  return ok and 'ok' or 'error'
end }
