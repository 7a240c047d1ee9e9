-- Spending tokens of a queue's bucket, in one place for the claim and the
-- step token. A claimer whose statement waited for another claimer's lock on
-- the bucket row sees that claimer's newer refilled_at while its own now()
-- (its transaction's start) is older. Setting refilled_at to that older
-- now(), as version 12 did, moved the refill time back and credited the time
-- between the two a second time: the fleet ran more steps than the rate.
-- The refill time now only moves forward.
CREATE OR REPLACE FUNCTION {schema}.queue_spend(p_rate double precision, p_burst integer,
                                                p_tokens double precision,
                                                p_refilled_at timestamptz, p_spent bigint,
                                                OUT tokens double precision,
                                                OUT refilled_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT {schema}.queue_tokens(p_rate, p_burst, p_tokens, p_refilled_at) - p_spent,
         greatest(p_refilled_at, now())
$$;
