-- Users, organizations, memberships and API keys: who may call coderd and as whom.

CREATE TABLE organizations (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL,
    display_name text        NOT NULL,
    description  text        NOT NULL DEFAULT '',
    icon         text        NOT NULL DEFAULT '',
    is_default   boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE UNIQUE INDEX organizations_name_key ON organizations (lower(name));
-- Exactly one organization may be the default one (the one the first user creates).
CREATE UNIQUE INDEX organizations_single_default ON organizations (is_default) WHERE is_default;

CREATE TABLE users (
    id              uuid        PRIMARY KEY,
    email           text        NOT NULL,
    username        text        NOT NULL,
    name            text        NOT NULL DEFAULT '',
    hashed_password text        NOT NULL,
    status          text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'dormant')),
    rbac_roles      text[]      NOT NULL DEFAULT '{}',
    login_type      text        NOT NULL DEFAULT 'password',
    avatar_url      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    deleted         boolean     NOT NULL DEFAULT false
);
-- Deleted users free their email and username for reuse.
CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE NOT deleted;
CREATE UNIQUE INDEX users_username_key ON users (lower(username)) WHERE NOT deleted;

CREATE TABLE organization_members (
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    roles           text[]      NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX organization_members_user_id ON organization_members (user_id);

-- A token is "<id>-<secret>"; only SHA-256(secret) is kept.
CREATE TABLE api_keys (
    id               text        PRIMARY KEY,
    hashed_secret    bytea       NOT NULL,
    user_id          uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    login_type       text        NOT NULL,
    token_name       text        NOT NULL DEFAULT '',
    scope            text        NOT NULL DEFAULT 'all',
    lifetime_seconds bigint      NOT NULL,
    expires_at       timestamptz NOT NULL,
    last_used        timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX api_keys_user_id ON api_keys (user_id);
CREATE UNIQUE INDEX api_keys_token_name_key ON api_keys (user_id, token_name) WHERE token_name <> '';

-- Deployment-wide settings that must survive restarts (the deployment id, ...).
CREATE TABLE site_configs (
    key   text PRIMARY KEY,
    value text NOT NULL
);
