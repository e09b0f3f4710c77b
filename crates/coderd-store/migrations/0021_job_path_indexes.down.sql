ALTER TABLE workspace_builds RESET (fillfactor);
DROP INDEX provisioner_jobs_running;
CREATE INDEX provisioner_jobs_running ON provisioner_jobs (updated_at)
    WHERE started_at IS NOT NULL AND completed_at IS NULL;
CREATE INDEX provisioner_jobs_worker ON provisioner_jobs (worker_id) WHERE completed_at IS NULL;
