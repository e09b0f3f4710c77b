-- Who did what (Coder's audit log). Rows are written in the transaction of the change they
-- record, never updated, and only removed by the retention purge. `user_id` is NULL for
-- coderd's own work (the lifecycle executor) and for failed logins of unknown accounts; it is
-- not a foreign key, so deleting a user keeps the record of what they did.
CREATE TABLE audit_logs (
    id                uuid        PRIMARY KEY,
    -- The moment of the write, not of its transaction: entries of one transaction keep their order.
    time              timestamptz NOT NULL DEFAULT clock_timestamp(),
    user_id           uuid,
    organization_id   uuid,
    ip                inet,
    user_agent        text        NOT NULL DEFAULT '',
    resource_type     text        NOT NULL,
    resource_id       uuid        NOT NULL,
    resource_target   text        NOT NULL DEFAULT '',
    action            text        NOT NULL,
    diff              jsonb       NOT NULL DEFAULT '{}',
    status_code       integer     NOT NULL,
    additional_fields jsonb       NOT NULL DEFAULT '{}',
    request_id        uuid        NOT NULL,
    description       text        NOT NULL DEFAULT ''
);

-- Pages are newest first; the purge deletes by age.
CREATE INDEX audit_logs_time_idx ON audit_logs (time DESC, id);
CREATE INDEX audit_logs_resource_idx ON audit_logs (resource_id);
