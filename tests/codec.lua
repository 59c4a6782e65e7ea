-- Test only: the compact codecs' operations one at a time, over bytes in
-- memory, for the codec vectors (tests/codec_vectors.rs,
-- tests/vectors/codec.json). Appended to the library's modules by
-- scripts/build-library.sh OUT tests/codec.lua.
--
--   FCALL swl_codec 0 format has_before before op...   { 'ok' or 'error', after }
--
-- Each op is a token: record:time:count, trim_through:floor, cap_to:max,
-- drop_newest:count or reclaim (last), run in turn on the log `before`
-- (has_before 0: no log) as one call runs them (opened once, changed,
-- finished, then reclaimed): a value is read in the version its version
-- byte names (as src/redis/mod.rs opens a key), no value as a new log in
-- `format`. The codecs' reads
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

local function run(format, ops)
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
  local reclaim = false
  for i, token in ipairs(ops) do
    local op, a, b = string.match(token, '^([%a_]+):?(%-?%d*):?(%d*)$')
    a, b = tonumber(a), tonumber(b)
    if op == 'record' then
      log:record(a, b)
    elseif op == 'trim_through' then
      log:trim_through(a)
    elseif op == 'cap_to' then
      log:cap_to(a)
    elseif op == 'drop_newest' then
      log:drop_newest(a)
    elseif op == 'reclaim' and i == #ops then
      reclaim = true
    else
      error('unknown op ' .. token)
    end
  end
  local ok = log:finish()
  if ok and reclaim then log:reclaim() end
  return ok
end

redis.register_function { function_name = 'swl_codec', callback = function(_, args)
  if not redis_call then bind_globals() end
  memory = { codec = args[2] == '1' and args[3] or nil }
  local ops = {}
  for i = 4, #args do ops[#ops + 1] = args[i] end
  local real = {}
  for name, f in pairs(in_memory) do real[name], keyspace[name] = keyspace[name], f end
  local done, ok = pcall(run, args[1], ops)
  for name, f in pairs(real) do keyspace[name] = f end
  compact.release()
  packed.release()
  if not done then return redis.error_reply('ERR ' .. tostring(ok)) end
  return { ok and 'ok' or 'error', memory.codec or false }
end }
