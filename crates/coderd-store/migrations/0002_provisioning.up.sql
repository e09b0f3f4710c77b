-- Templates, provisioner jobs and daemons, workspaces and their builds.

-- Uploaded template archives. Content-addressed per uploader: the same bytes from the same user
-- are stored once.
CREATE TABLE files (
    id         uuid        PRIMARY KEY,
    hash       text        NOT NULL,
    created_by uuid        NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    mimetype   text        NOT NULL,
    data       bytea       NOT NULL,
    UNIQUE (hash, created_by)
);

CREATE TABLE templates (
    id                               uuid        PRIMARY KEY,
    organization_id                  uuid        NOT NULL REFERENCES organizations (id),
    name                             text        NOT NULL,
    display_name                     text        NOT NULL DEFAULT '',
    description                      text        NOT NULL DEFAULT '',
    icon                             text        NOT NULL DEFAULT '',
    provisioner                      text        NOT NULL,
    active_version_id                uuid        NOT NULL,
    created_by                       uuid        NOT NULL REFERENCES users (id),
    created_at                       timestamptz NOT NULL,
    updated_at                       timestamptz NOT NULL,
    deleted                          boolean     NOT NULL DEFAULT false,
    default_ttl_ms                   bigint      NOT NULL DEFAULT 0,
    allow_user_cancel_workspace_jobs boolean     NOT NULL DEFAULT true,
    deprecated                       text        NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX templates_org_name_key ON templates (organization_id, lower(name)) WHERE NOT deleted;

CREATE TABLE provisioner_jobs (
    id              uuid        PRIMARY KEY,
    created_at      timestamptz NOT NULL,
    -- Doubles as the heartbeat of a running job.
    updated_at      timestamptz NOT NULL,
    started_at      timestamptz,
    canceled_at     timestamptz,
    completed_at    timestamptz,
    error           text,
    error_code      text,
    organization_id uuid        NOT NULL REFERENCES organizations (id),
    initiator_id    uuid        NOT NULL REFERENCES users (id),
    provisioner     text        NOT NULL,
    storage_method  text        NOT NULL DEFAULT 'file',
    file_id         uuid        NOT NULL REFERENCES files (id),
    type            text        NOT NULL CHECK (type IN ('template_version_import', 'workspace_build', 'template_version_dry_run')),
    input           jsonb       NOT NULL,
    worker_id       uuid,
    tags            jsonb       NOT NULL,
    -- The canonical JSON of `tags` (sorted keys): daemons look jobs up by the exact keys of the
    -- tag subsets they accept, so the pending index below serves every acquisition with a few
    -- index probes however many jobs nobody can take.
    tags_key        text        NOT NULL,
    logs_length     integer     NOT NULL DEFAULT 0,
    logs_overflowed boolean     NOT NULL DEFAULT false
);
CREATE INDEX provisioner_jobs_pending ON provisioner_jobs (organization_id, provisioner, tags_key, created_at, id)
    WHERE started_at IS NULL AND canceled_at IS NULL;
CREATE INDEX provisioner_jobs_running ON provisioner_jobs (updated_at)
    WHERE started_at IS NOT NULL AND completed_at IS NULL;
CREATE INDEX provisioner_jobs_worker ON provisioner_jobs (worker_id) WHERE completed_at IS NULL;
CREATE INDEX provisioner_jobs_org_created ON provisioner_jobs (organization_id, created_at DESC);

CREATE TABLE provisioner_job_logs (
    id         bigserial   PRIMARY KEY,
    job_id     uuid        NOT NULL REFERENCES provisioner_jobs (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    source     text        NOT NULL,
    level      text        NOT NULL,
    stage      text        NOT NULL,
    output     text        NOT NULL
);
CREATE INDEX provisioner_job_logs_job ON provisioner_job_logs (job_id, id);

CREATE TABLE provisioner_job_timings (
    job_id     uuid        NOT NULL REFERENCES provisioner_jobs (id) ON DELETE CASCADE,
    stage      text        NOT NULL,
    source     text        NOT NULL DEFAULT '',
    action     text        NOT NULL DEFAULT '',
    resource   text        NOT NULL DEFAULT '',
    started_at timestamptz NOT NULL,
    ended_at   timestamptz NOT NULL
);
CREATE INDEX provisioner_job_timings_job ON provisioner_job_timings (job_id);

CREATE TABLE template_versions (
    id                      uuid        PRIMARY KEY,
    template_id             uuid        REFERENCES templates (id),
    organization_id         uuid        NOT NULL REFERENCES organizations (id),
    name                    text        NOT NULL,
    message                 text        NOT NULL DEFAULT '',
    readme                  text        NOT NULL DEFAULT '',
    job_id                  uuid        NOT NULL UNIQUE REFERENCES provisioner_jobs (id),
    created_by              uuid        NOT NULL REFERENCES users (id),
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL,
    archived                boolean     NOT NULL DEFAULT false,
    -- Set by the import job; immutable afterwards.
    rich_parameters         jsonb       NOT NULL DEFAULT '[]',
    variables               jsonb       NOT NULL DEFAULT '[]',
    user_variable_values    jsonb       NOT NULL DEFAULT '[]',
    external_auth_providers jsonb       NOT NULL DEFAULT '[]'
);
CREATE UNIQUE INDEX template_versions_template_name_key ON template_versions (template_id, lower(name));
ALTER TABLE templates ADD CONSTRAINT templates_active_version_fkey
    FOREIGN KEY (active_version_id) REFERENCES template_versions (id) DEFERRABLE INITIALLY DEFERRED;

-- Keys external daemons authenticate with; only a hash of the secret is kept.
CREATE TABLE provisioner_keys (
    id              uuid        PRIMARY KEY,
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text        NOT NULL,
    hashed_secret   bytea       NOT NULL,
    tags            jsonb       NOT NULL,
    created_at      timestamptz NOT NULL
);
CREATE UNIQUE INDEX provisioner_keys_org_name_key ON provisioner_keys (organization_id, lower(name));
CREATE UNIQUE INDEX provisioner_keys_secret_key ON provisioner_keys (hashed_secret);

-- A daemon's identity survives reconnects: (organization, name, owner tag).
CREATE TABLE provisioner_daemons (
    id              uuid        PRIMARY KEY,
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text        NOT NULL,
    owner_key       text        NOT NULL DEFAULT '',
    provisioners    text[]      NOT NULL,
    tags            jsonb       NOT NULL,
    version         text        NOT NULL DEFAULT '',
    api_version     text        NOT NULL DEFAULT '',
    key_id          uuid        REFERENCES provisioner_keys (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    UNIQUE (organization_id, name, owner_key)
);

CREATE TABLE workspaces (
    id                 uuid        PRIMARY KEY,
    owner_id           uuid        NOT NULL REFERENCES users (id),
    organization_id    uuid        NOT NULL REFERENCES organizations (id),
    template_id        uuid        NOT NULL REFERENCES templates (id),
    name               text        NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    last_used_at       timestamptz NOT NULL,
    deleted            boolean     NOT NULL DEFAULT false,
    autostart_schedule text,
    ttl_ms             bigint,
    automatic_updates  text        NOT NULL DEFAULT 'never'
);
CREATE UNIQUE INDEX workspaces_owner_name_key ON workspaces (owner_id, lower(name)) WHERE NOT deleted;
CREATE INDEX workspaces_template ON workspaces (template_id) WHERE NOT deleted;
CREATE INDEX workspaces_org ON workspaces (organization_id) WHERE NOT deleted;

CREATE TABLE workspace_builds (
    id                  uuid        PRIMARY KEY,
    workspace_id        uuid        NOT NULL REFERENCES workspaces (id),
    template_version_id uuid        NOT NULL REFERENCES template_versions (id),
    build_number        integer     NOT NULL,
    transition          text        NOT NULL CHECK (transition IN ('start', 'stop', 'delete')),
    initiator_id        uuid        NOT NULL REFERENCES users (id),
    -- The provisioner's state after this build; the next build starts from it.
    provisioner_state   bytea,
    job_id              uuid        NOT NULL UNIQUE REFERENCES provisioner_jobs (id),
    reason              text        NOT NULL DEFAULT 'initiator',
    daily_cost          integer     NOT NULL DEFAULT 0,
    deadline            timestamptz,
    max_deadline        timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    UNIQUE (workspace_id, build_number)
);

CREATE TABLE workspace_build_parameters (
    workspace_build_id uuid NOT NULL REFERENCES workspace_builds (id) ON DELETE CASCADE,
    name               text NOT NULL,
    value              text NOT NULL,
    PRIMARY KEY (workspace_build_id, name)
);

-- What a job produced: resources, their agents, the agents' apps.
CREATE TABLE workspace_resources (
    id            uuid        PRIMARY KEY,
    job_id        uuid        NOT NULL REFERENCES provisioner_jobs (id) ON DELETE CASCADE,
    transition    text        NOT NULL,
    type          text        NOT NULL,
    name          text        NOT NULL,
    hide          boolean     NOT NULL DEFAULT false,
    icon          text        NOT NULL DEFAULT '',
    instance_type text        NOT NULL DEFAULT '',
    daily_cost    integer     NOT NULL DEFAULT 0,
    module_path   text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL
);
CREATE INDEX workspace_resources_job ON workspace_resources (job_id);

CREATE TABLE workspace_resource_metadata (
    workspace_resource_id uuid    NOT NULL REFERENCES workspace_resources (id) ON DELETE CASCADE,
    position              integer NOT NULL,
    key                   text    NOT NULL,
    value                 text,
    sensitive             boolean NOT NULL DEFAULT false,
    PRIMARY KEY (workspace_resource_id, position)
);

CREATE TABLE workspace_agents (
    id                         uuid        PRIMARY KEY,
    resource_id                uuid        NOT NULL REFERENCES workspace_resources (id) ON DELETE CASCADE,
    name                       text        NOT NULL,
    -- SHA-256 of the agent's token; the agent authenticates with the token itself.
    auth_token_hash            bytea,
    auth_instance_id           text,
    architecture               text        NOT NULL,
    operating_system           text        NOT NULL,
    directory                  text        NOT NULL DEFAULT '',
    environment_variables      jsonb       NOT NULL DEFAULT '{}',
    connection_timeout_seconds integer     NOT NULL DEFAULT 0,
    troubleshooting_url        text        NOT NULL DEFAULT '',
    motd_file                  text        NOT NULL DEFAULT '',
    display_apps               text[]      NOT NULL DEFAULT '{}',
    api_key_scope              text        NOT NULL DEFAULT 'all',
    display_order              bigint      NOT NULL DEFAULT 0,
    -- Everything else the template declared for the agent (scripts, metadata, ...), as the
    -- provisioner returned it.
    spec                       jsonb       NOT NULL DEFAULT '{}',
    created_at                 timestamptz NOT NULL,
    updated_at                 timestamptz NOT NULL,
    first_connected_at         timestamptz,
    last_connected_at          timestamptz,
    disconnected_at            timestamptz,
    lifecycle_state            text        NOT NULL DEFAULT 'created',
    started_at                 timestamptz,
    ready_at                   timestamptz,
    version                    text        NOT NULL DEFAULT '',
    api_version                text        NOT NULL DEFAULT '',
    expanded_directory         text        NOT NULL DEFAULT '',
    logs_length                integer     NOT NULL DEFAULT 0,
    logs_overflowed            boolean     NOT NULL DEFAULT false
);
CREATE INDEX workspace_agents_resource ON workspace_agents (resource_id);
-- Not unique: a build that leaves the agent untouched keeps its token, so several builds' agents
-- share it; authentication picks the newest.
CREATE INDEX workspace_agents_token ON workspace_agents (auth_token_hash);

CREATE TABLE workspace_apps (
    id                    uuid        PRIMARY KEY,
    agent_id              uuid        NOT NULL REFERENCES workspace_agents (id) ON DELETE CASCADE,
    slug                  text        NOT NULL,
    display_name          text        NOT NULL DEFAULT '',
    icon                  text        NOT NULL DEFAULT '',
    command               text,
    url                   text,
    external              boolean     NOT NULL DEFAULT false,
    subdomain             boolean     NOT NULL DEFAULT false,
    sharing_level         text        NOT NULL DEFAULT 'owner',
    healthcheck_url       text        NOT NULL DEFAULT '',
    healthcheck_interval  integer     NOT NULL DEFAULT 0,
    healthcheck_threshold integer     NOT NULL DEFAULT 0,
    health                text        NOT NULL DEFAULT 'disabled',
    open_in               text        NOT NULL DEFAULT 'slim-window',
    display_order         bigint      NOT NULL DEFAULT 0,
    hidden                boolean     NOT NULL DEFAULT false,
    display_group         text        NOT NULL DEFAULT '',
    created_at            timestamptz NOT NULL,
    UNIQUE (agent_id, slug)
);
