--[[ The decision, the same for both encodings: src/window.rs in Lua. ]]

-- Each window's entries above its floor, in one table that every call
-- fills afresh (as a log's state), and whether `cost` more fit in every
-- window. (Loops here count windows rather than use ipairs, and compare
-- rather than call math.max: these run on every call, where each
-- function call shows.)
local counted = {}
local function counts(log, windows, now, cost)
  local n, admits = #windows, true
  for i = 1, n do
    local w = windows[i]
    local count = log:count_above(now - w.ms)
    counted[i] = count
    if count + cost > w.limit then admits = false end
  end
  -- An earlier call's windows past these are gone, so #counts is #windows.
  if counted[n + 1] ~= nil then
    for i = n + 1, #counted do counted[i] = nil end
  end
  return counted, admits
end

-- Each window's count after `recorded` entries at now (inside every window)
-- and, with a cap, after only the newest `cap` entries were kept: in
-- `counts`, which the caller no longer needs as it was.
local function add_recorded(counts, recorded, cap)
  for i = 1, #counts do
    local n = counts[i] + recorded
    if cap and n > cap then n = cap end
    counts[i] = n
  end
  return counts
end

-- Milliseconds until an entry at `score` leaves a window of `ms` at `now`:
-- ceil(score) + ms - now, exact while it stays within 2^53 (past that a
-- double rounds it, where the module is exact), NEVER_MS for an entry that
-- never leaves (+inf written by another tool).
local function ms_until_left(score, ms, now)
  if score % 1 ~= 0 then score = math.ceil(score) end
  local wait = (score - now) + ms
  if wait ~= wait or wait <= 0 then return 0 end
  if wait > NEVER_MS then return NEVER_MS end
  return wait
end

-- When `cost` more units fit: once the (limit - cost + 1)-th newest entry
-- leaves the window; and that entry's score, where one was read.
local function retry_after(log, len, w, now, cost)
  if cost > w.limit then return -1 end
  local score = log:score_at(len - (w.limit - cost + 1))
  if not score then return 1 end
  local wait = ms_until_left(score, w.ms, now)
  return wait > 1 and wait or 1, score
end

-- -1 (waiting cannot help) outranks any wait; otherwise the longer wait.
local function waits_longer(retry, than)
  if than == -1 then return false end
  if retry == -1 then return true end
  return retry > than
end

-- exactly_longer and what only it uses, kept to a block (a Lua chunk
-- has at most 200 locals).
local exactly_longer
do

-- Whether the wait for an entry at `score` to leave a window of `ms` at
-- `now` reaches NEVER_MS, where the module stops counting: a score from
-- 2^60 on, or ceil(score) + ms - now >= 2^54, compared by the sign of
-- (score - 2^54) + (ms - now), both parts exact where it matters (below
-- 2^53 no score gets there).
local TWO_53, TWO_60 = 9007199254740992, 1152921504606846976
local function never_leaves(score, ms, now)
  score = math.ceil(score)
  return score >= TWO_60 or (score >= TWO_53 and (score - NEVER_MS) + (ms - now) >= 0)
end

-- Whether the wait for an entry at `score` to leave a window of `ms` is
-- longer than for one at `than_score` and `than_ms`, where both waits
-- rounded to the same double past 2^53 (the module compares them exactly,
-- so the same window binds): ceil(s) + ms - now, capped at NEVER_MS as the
-- module caps it, compared by the sign of the difference, whose two parts
-- are exact.
exactly_longer = function(score, ms, than_score, than_ms, now)
  if never_leaves(than_score, than_ms, now) then return false end
  if never_leaves(score, ms, now) then return true end
  return (math.ceil(score) - math.ceil(than_score)) + (ms - than_ms) > 0
end
end

-- The reply, from each window's count after the call and the log as it
-- stands; `pending` counts `cost` entries at `now` as recorded without
-- their being in the log (SWL.PEEK of an admit).
local function verdict(log, windows, counts, now, cost, allowed, pending)
  -- The window that binds: admitted, the one with the fewest units left;
  -- denied, the longest wait among those the cost does not fit. Only its
  -- reply is made.
  local bound, bound_left, bound_retry, bound_score, len
  for i = 1, #windows do
    local w, count = windows[i], counts[i]
    local limit = w.limit
    local left = count < limit and limit - count or 0
    if allowed then
      if not bound or left < bound_left then bound, bound_left = i, left end
    elseif count + cost > limit then
      len = len or log:len()
      local retry, score = retry_after(log, len, w, now, cost)
      if not bound or waits_longer(retry, bound_retry)
          or (retry == bound_retry and retry > MAX_MS
            and exactly_longer(score, w.ms, bound_score, windows[bound].ms, now)) then
        bound, bound_left, bound_retry, bound_score = i, left, retry, score
      end
    end
  end
  if not bound then
    -- A denial that no window explains any more (a penalty cap shrank the
    -- log): the first window describes it, and the client may retry.
    bound, bound_retry = 1, 1
    local left = windows[1].limit - counts[1]
    bound_left = left > 0 and left or 0
  end
  local wide = windows.widest
  -- An admitted check has just recorded entries at now.
  local newest = log:newest(allowed and not pending and now or nil)
  if newest and not (newest > now - wide.ms) then newest = nil end
  -- An admitted check's entries at now count, also where another writer
  -- damaged the log's ends (as in the module).
  if allowed and not (newest and newest > now) then newest = now end
  local w = windows[bound]
  return { allowed and 1 or 0, w.limit, bound_left, allowed and -1 or bound_retry,
    newest and ms_until_left(newest, wide.ms, now) or 0, w.ms }
end

return { counts = counts, add_recorded = add_recorded, ms_until_left = ms_until_left, verdict = verdict }
