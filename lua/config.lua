#!lua name=swl
--[[
redis-swl without the module: a Redis Functions library (Redis 7+) with the
same arguments, replies, errors and key contents as SWL.CHECK, SWL.PEEK,
SWL.REFUND and SWL.ENTRIES, for servers that cannot load modules. It reads and writes both
encodings of a log, sorted sets and compact logs, as the module does.

  redis-cli FUNCTION LOAD REPLACE "$(cat scripts/swl.lua)"
  FCALL swl_check   1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [PENALIZE | FORCE]
  FCALL swl_peek    1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [OLDEST]
  FCALL swl_refund  1 key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
  FCALL swl_entries 1 key

A compact log is left with the same bytes as the module leaves; in a sorted
set only the members of the entries differ from the module's (both are
random 14-digit numbers). It is slower: see "Choosing" in the README.
]]

-- How a new log is stored, as the module's swl.encoding: 'compact' (a
-- compact log string in format version 2, the default), 'compact1'
-- (format version 1, which 0.3 reads: while 0.3 still serves the keys) or
-- 'zset' (a sorted set, as the usual script's keys). Existing keys keep
-- theirs. Change it by loading the library with this line edited
-- (docs/encodings.md).
local ENCODING = 'compact'
