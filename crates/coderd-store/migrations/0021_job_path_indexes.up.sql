-- One index for the jobs daemons hold, instead of two. A job's worker_id and started_at are
-- set together (the claim, a build claimed at creation) and cleared together (a requeue), so
-- "held by a daemon and open" is `worker_id IS NOT NULL AND completed_at IS NULL`:
-- - a daemon's current job (`worker_id = $1 AND completed_at IS NULL`, which implies the
--   predicate) probes it by worker;
-- - the hang detector reads all of it (as many entries as running jobs) and filters on
--   updated_at.
-- Pending jobs no longer get an entry (the old worker index held a NULL for each), and
-- updated_at is no longer indexed, so a heartbeat that only moves it can be a HOT update.
-- Every claim and every pending insert writes one index entry fewer.
DROP INDEX provisioner_jobs_worker;
DROP INDEX provisioner_jobs_running;
CREATE INDEX provisioner_jobs_running ON provisioner_jobs (worker_id)
    WHERE worker_id IS NOT NULL AND completed_at IS NULL;

-- A build's row is updated once, right after its insert (the completion); none of the columns
-- it writes is indexed, so the new version can stay on the page (a HOT update, no new entries
-- in the table's three indexes) when the page has room. Packed full, a third of them did not.
ALTER TABLE workspace_builds SET (fillfactor = 90);
