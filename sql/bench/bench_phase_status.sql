-- How many runs of a phase (its runs carry the tag $1 in their input) are in
-- each status.
SELECT status, count(*) FROM {schema}.runs WHERE input @> $1::jsonb GROUP BY status
