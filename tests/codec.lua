-- Test only: the compact codecs' operations one at a time, over bytes in
-- memory, for the codec vectors (tests/codec_vectors.rs,
-- tests/vectors/codec.json). Appended to the library's modules by
-- scripts/build-library.sh OUT tests/codec.lua.
--
--   FCALL swl_codec 0 format op a b [before]   { 'ok' or 'error', after }
--
-- op is record (a: time, b: count), trim_through (a: floor), cap_to (a:
-- max), drop_newest (a: count) or reclaim, on the log `before` (none: no
-- log): a value is read in the version its version byte names (as
-- src/format.rs dispatches), no value as a new log in `format`. Each runs
-- as a call runs it (opened, changed, finished), with the codecs' reads
-- and writes (keyspace) on a string in memory rather than a key: no key
-- is read or written, which shows the codecs issue no command of their
-- own. `after` is the bytes left, false for none.
local memory = {}
local in_memory = {
  getrange = function(key, at, n) return string.sub(memory[key] or '', at + 1, at + n) end,
  start = function(key) return string.sub(memory[key] or '', 1, READ_WHOLE_AT_MOST) end,
  strlen = function(key) return #(memory[key] or '') end,
  setrange = function(key, at, bytes)
    local value = memory[key] or ''
    if #value < at then value = value .. string.rep('\0', at - #value) end
    memory[key] = string.sub(value, 1, at) .. bytes .. string.sub(value, at + #bytes + 1)
  end,
  set = function(key, value) memory[key] = value end,
  unlink = function(key) memory[key] = nil end,
  exists = function(key) return memory[key] ~= nil end,
}

local function run(format, op, a, b)
  local key = 'codec'
  local start = in_memory.start(key)
  local exists = memory[key] ~= nil
  local codec
  if exists then
    codec = string.byte(start, 5) == 2 and packed or compact
  else
    codec = format == '2' and packed or compact
  end
  local log = codec.log(key, exists, exists and start or nil)
  if not log then return false end
  if op == 'record' then
    log:record(a, b)
  elseif op == 'trim_through' then
    log:trim_through(a)
  elseif op == 'cap_to' then
    log:cap_to(a)
  elseif op == 'drop_newest' then
    log:drop_newest(a)
  elseif op ~= 'reclaim' then
    error('unknown op ' .. op)
  end
  local ok = log:finish()
  if ok and op == 'reclaim' then log:reclaim() end
  return ok
end

redis.register_function { function_name = 'swl_codec', callback = function(_, args)
  if not redis_call then bind_globals() end
  memory = { codec = args[5] }
  local real = {}
  for name, f in pairs(in_memory) do real[name], keyspace[name] = keyspace[name], f end
  local done, ok = pcall(run, args[1], args[2], tonumber(args[3]), tonumber(args[4]))
  for name, f in pairs(real) do keyspace[name] = f end
  compact.release()
  packed.release()
  if not done then return redis.error_reply('ERR ' .. tostring(ok)) end
  return { ok and 'ok' or 'error', memory.codec or false }
end }
