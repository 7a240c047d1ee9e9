-- After a wait for the first child resumed its parent: cancels the other
-- children of the wait that asked to be (cancel_when_first_done).
SELECT {schema}.cancel_children_outrun($1)
