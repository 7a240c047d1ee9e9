-- What the server has done so far, read before and after a measured phase:
-- transactions committed and rolled back in this database (pg_stat_database),
-- the next transaction id to be given out (ids given out in between are the
-- transactions that wrote; reading it gives out none), the WAL position in
-- bytes, and WAL records, full-page images and fsyncs (pg_stat_wal, the whole
-- server).
SELECT d.xact_commit, d.xact_rollback,
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid,
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal_bytes,
       w.wal_records, w.wal_fpi, w.wal_sync
FROM pg_stat_database d, pg_stat_wal w
WHERE d.datname = current_database()
