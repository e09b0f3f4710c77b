-- External auth: a user's link with each git provider (Coder's external_auth_links), and each
-- user's git SSH key. Every token and private key is stored sealed (AES-256-GCM, see
-- oauth-client's KeyRing); `*_key_id` names the key that sealed it, so `dbcrypt rotate` finds
-- what still needs re-sealing without opening everything.
CREATE TABLE external_auth_links (
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    oauth_access_token text NOT NULL,
    -- Empty when the provider issued none, or after it refused one.
    oauth_refresh_token text NOT NULL DEFAULT '',
    oauth_expiry timestamptz,
    -- The sealed JSON object of the token response's fields named by EXTRA_TOKEN_KEYS.
    oauth_extra text NOT NULL DEFAULT '',
    oauth_key_id text NOT NULL,
    -- Why the link stopped working (a refused refresh), shown to the user until they link again.
    oauth_refresh_failure_reason text NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, provider_id)
);

CREATE TABLE gitsshkeys (
    user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    private_key text NOT NULL,
    public_key text NOT NULL
);
