-- Workspaces that look after themselves: template schedules, workspace dormancy and the
-- lifecycle executor's bookkeeping.

ALTER TABLE templates
    -- How far activity pushes a running workspace's deadline (0: activity does not).
    ADD COLUMN activity_bump_ms                  bigint   NOT NULL DEFAULT 3600000,
    -- Days (bit 0 Monday … bit 6 Sunday) a restart is required, every n weeks.
    ADD COLUMN autostop_requirement_days_of_week smallint NOT NULL DEFAULT 0,
    ADD COLUMN autostop_requirement_weeks        bigint   NOT NULL DEFAULT 1,
    -- Days autostart may happen on.
    ADD COLUMN autostart_allowed_days            smallint NOT NULL DEFAULT 127,
    ADD COLUMN allow_user_autostart              boolean  NOT NULL DEFAULT true,
    ADD COLUMN allow_user_autostop               boolean  NOT NULL DEFAULT true,
    ADD COLUMN failure_ttl_ms                    bigint   NOT NULL DEFAULT 0,
    ADD COLUMN time_til_dormant_ms               bigint   NOT NULL DEFAULT 0,
    ADD COLUMN time_til_dormant_autodelete_ms    bigint   NOT NULL DEFAULT 0,
    ADD COLUMN require_active_version            boolean  NOT NULL DEFAULT false,
    ADD COLUMN max_port_share_level              text     NOT NULL DEFAULT 'owner'
        CHECK (max_port_share_level IN ('owner', 'authenticated', 'organization', 'public'));

ALTER TABLE workspaces
    -- Set while the workspace is dormant: it is stopped and may not start.
    ADD COLUMN dormant_at         timestamptz,
    -- The next autostart, kept current so the executor finds due workspaces by index.
    ADD COLUMN next_start_at      timestamptz,
    -- The last autostart the executor could not create, and why; not retried before the
    -- schedule's next time.
    ADD COLUMN autostart_failed_at timestamptz,
    ADD COLUMN autostart_failure   text;

CREATE INDEX workspaces_next_start_at ON workspaces (next_start_at)
    WHERE NOT deleted AND next_start_at IS NOT NULL;
