-- The error replies, as src/error.rs writes them (tests/library.rs
-- compares the two).
local ERR_WINDOW = 'ERR window_ms must be an integer from 1 to 9007199254740991'
local ERR_LIMIT = 'ERR limit must be an integer from 0 to 9007199254740991'
local ERR_NOW = 'ERR now_ms must be an integer from 0 to 9007199254740991, or *'
local ERR_COST = 'ERR cost must be an integer from 1 to 100000'
local ERR_WINDOWS = 'ERR too many windows: at most 100 per call'
local ERR_SYNTAX = 'ERR syntax error'
local ERR_WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local ERR_ONE_KEY = 'ERR the function takes exactly one key'
