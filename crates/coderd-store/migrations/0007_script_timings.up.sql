-- Each run of an agent's script, for a build's timeline (GET /workspacebuilds/{id}/timings).
-- Keyed by script and start so an agent resending after a reconnect writes nothing twice.
CREATE TABLE workspace_agent_script_timings (
    script_id  uuid        NOT NULL REFERENCES workspace_agent_scripts (id) ON DELETE CASCADE,
    started_at timestamptz NOT NULL,
    ended_at   timestamptz NOT NULL,
    exit_code  integer     NOT NULL,
    stage      text        NOT NULL,
    status     text        NOT NULL,
    PRIMARY KEY (script_id, started_at)
);
