-- Which identity at which provider is which user: OIDC (issuer and subject) and, next, GitHub
-- logins link here, so a renamed email at the provider still signs into the same account.
-- Provider tokens are sealed (AES-256-GCM under CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS) or not
-- kept at all; the key id of each is in the sealed value itself.
CREATE TABLE user_links (
    user_id                uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    login_type             text        NOT NULL,
    linked_id              text        NOT NULL,
    oauth_access_token     text        NOT NULL DEFAULT '',
    oauth_refresh_token    text        NOT NULL DEFAULT '',
    oauth_expiry           timestamptz,
    -- The claims of the last sign-in (ID token merged with userinfo), for group sync and support.
    claims                 jsonb       NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (user_id, login_type)
);
CREATE UNIQUE INDEX user_links_linked_id_key ON user_links (login_type, linked_id);
