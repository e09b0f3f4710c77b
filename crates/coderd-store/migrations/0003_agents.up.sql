-- What a workspace agent runs and reports: scripts and their log sources, logs, metadata, stats.

CREATE TABLE workspace_agent_log_sources (
    id           uuid        PRIMARY KEY,
    agent_id     uuid        NOT NULL REFERENCES workspace_agents (id) ON DELETE CASCADE,
    display_name text        NOT NULL,
    icon         text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL
);
CREATE INDEX workspace_agent_log_sources_agent ON workspace_agent_log_sources (agent_id);

CREATE TABLE workspace_agent_scripts (
    id                 uuid        PRIMARY KEY,
    agent_id           uuid        NOT NULL REFERENCES workspace_agents (id) ON DELETE CASCADE,
    log_source_id      uuid        NOT NULL REFERENCES workspace_agent_log_sources (id) ON DELETE CASCADE,
    display_name       text        NOT NULL,
    script             text        NOT NULL,
    cron               text        NOT NULL DEFAULT '',
    run_on_start       boolean     NOT NULL DEFAULT false,
    run_on_stop        boolean     NOT NULL DEFAULT false,
    start_blocks_login boolean     NOT NULL DEFAULT false,
    timeout_seconds    integer     NOT NULL DEFAULT 0,
    log_path           text        NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL
);
CREATE INDEX workspace_agent_scripts_agent ON workspace_agent_scripts (agent_id);

CREATE TABLE workspace_agent_logs (
    id            bigserial   PRIMARY KEY,
    agent_id      uuid        NOT NULL REFERENCES workspace_agents (id) ON DELETE CASCADE,
    log_source_id uuid        NOT NULL,
    created_at    timestamptz NOT NULL,
    level         text        NOT NULL,
    output        text        NOT NULL
);
CREATE INDEX workspace_agent_logs_agent ON workspace_agent_logs (agent_id, id);

-- The latest value per key: writes are batched, one statement for all agents per flush.
CREATE TABLE workspace_agent_metadata (
    agent_id         uuid        NOT NULL REFERENCES workspace_agents (id) ON DELETE CASCADE,
    key              text        NOT NULL,
    display_name     text        NOT NULL,
    script           text        NOT NULL,
    interval_seconds bigint      NOT NULL,
    timeout_seconds  bigint      NOT NULL,
    display_order    integer     NOT NULL DEFAULT 0,
    value            text        NOT NULL DEFAULT '',
    error            text        NOT NULL DEFAULT '',
    collected_at     timestamptz,
    PRIMARY KEY (agent_id, key)
);

-- The latest stats report per agent.
CREATE TABLE workspace_agent_stats (
    agent_id                       uuid        PRIMARY KEY REFERENCES workspace_agents (id) ON DELETE CASCADE,
    workspace_id                   uuid        NOT NULL REFERENCES workspaces (id),
    connections_by_proto           jsonb       NOT NULL DEFAULT '{}',
    connection_count               bigint      NOT NULL DEFAULT 0,
    rx_bytes                       bigint      NOT NULL DEFAULT 0,
    tx_bytes                       bigint      NOT NULL DEFAULT 0,
    session_count_ssh              bigint      NOT NULL DEFAULT 0,
    session_count_vscode           bigint      NOT NULL DEFAULT 0,
    session_count_jetbrains        bigint      NOT NULL DEFAULT 0,
    session_count_reconnecting_pty bigint      NOT NULL DEFAULT 0,
    reported_at                    timestamptz NOT NULL
);

ALTER TABLE workspace_agents ADD COLUMN subsystems text[] NOT NULL DEFAULT '{}';
