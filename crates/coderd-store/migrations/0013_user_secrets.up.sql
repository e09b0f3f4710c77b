-- Secrets users keep for their workspaces (Coder's user secrets), and what templates and
-- builds declare beyond resources: the secrets a version needs, AI tasks, external agents.

-- A value is stored only sealed (AES-256-GCM, `<key id>:<base64>`), bound to its row's id;
-- `value_key_id` names the key that sealed it, so a rotation finds what to re-seal.
CREATE TABLE user_secrets (
    id           uuid        PRIMARY KEY,
    user_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    description  text        NOT NULL DEFAULT '',
    value        text        NOT NULL,
    value_key_id text        NOT NULL,
    env_name     text        NOT NULL DEFAULT '',
    file_path    text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE UNIQUE INDEX user_secrets_user_name ON user_secrets (user_id, name);
-- Two secrets of a user must not compete for one variable or one file.
CREATE UNIQUE INDEX user_secrets_user_env_name ON user_secrets (user_id, env_name)
    WHERE env_name <> '';
CREATE UNIQUE INDEX user_secrets_user_file_path ON user_secrets (user_id, file_path)
    WHERE file_path <> '';

ALTER TABLE template_versions
    -- [{"env": ..., "file": ..., "help_message": ...}] from the start plan's coder_secret
    -- data sources: which of its owner's secrets a build of this version receives.
    ADD COLUMN secret_requirements jsonb   NOT NULL DEFAULT '[]',
    ADD COLUMN has_ai_task         boolean NOT NULL DEFAULT false,
    ADD COLUMN has_external_agent  boolean NOT NULL DEFAULT false;

ALTER TABLE workspace_builds
    -- NULL until the build's job succeeds (Coder's API shows them absent until then).
    ADD COLUMN has_ai_task            boolean,
    ADD COLUMN ai_task_sidebar_app_id uuid,
    ADD COLUMN has_external_agent     boolean;
