-- Turns this session's wake hints off (see the wake function of schema 18):
-- its starts notify nobody.
SELECT set_config('cairn.wake_hints', 'off', false)
