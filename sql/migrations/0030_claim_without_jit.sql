-- Schema 30: the claim is never compiled by JIT, whatever the session's
-- settings.
--
-- Migration 29 plans claim_runs with enable_sort off, so that its due read
-- is the index in order. The sorts that remain in its plan (of the few runs
-- it took) are then costed as disabled, 10^10 each, and the plan's cost
-- passes jit_above_cost, jit_inline_above_cost and jit_optimize_above_cost
-- by far. A session that leaves jit on (the server's default: a session
-- through a pooler that does not keep cairn's session settings, a test, a
-- tool calling the SQL API) had every claim compiled by LLVM: 0.3 s a claim
-- for a statement of 0.2 to 0.5 ms, measured on the development server. The
-- daemon's own sessions turn jit off for every statement already
-- (docs/cost-model.md, "Plans made once"); the function now does it for
-- itself, so that no caller pays it. Changes one function's settings;
-- rewrites nothing.
ALTER FUNCTION {schema}.claim_runs(text[], text[], integer, text, bigint, boolean, uuid, boolean)
  SET jit = off;
