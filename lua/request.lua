
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
