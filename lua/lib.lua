-- The functions, as src/lib.rs registers the commands.
redis.register_function { function_name = 'swl_check', callback = commands.check }
redis.register_function { function_name = 'swl_peek', callback = commands.peek, flags = { 'no-writes' } }
-- A refund only frees memory, so it runs when the server is out of it.
redis.register_function { function_name = 'swl_refund', callback = commands.refund, flags = { 'allow-oom' } }
redis.register_function { function_name = 'swl_entries', callback = commands.entries, flags = { 'no-writes' } }
-- The release this library is part of (Cargo.toml's version): FCALL_RO swl_version 0.
local VERSION = '0.4.0'
redis.register_function { function_name = 'swl_version', callback = function() return VERSION end, flags = { 'no-writes' } }
