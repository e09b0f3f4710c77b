-- A template version's presets (`coder_workspace_preset`), recorded when its import succeeds.
-- A version's presets never change afterwards, so they are rows of the version, not of the
-- template: a new version without a preset simply has no such row.
CREATE TABLE template_version_presets (
    id                  uuid        PRIMARY KEY,
    template_version_id uuid        NOT NULL REFERENCES template_versions (id) ON DELETE CASCADE,
    name                text        NOT NULL,
    is_default          boolean     NOT NULL DEFAULT false,
    description         text        NOT NULL DEFAULT '',
    icon                text        NOT NULL DEFAULT '',
    -- NULL: the preset has no `prebuilds` block.
    desired_instances   integer     CHECK (desired_instances >= 0),
    -- Seconds an unclaimed prebuild may live; NULL or 0: forever.
    expiration_ttl      integer     CHECK (expiration_ttl >= 0),
    -- The `scheduling` block as the converter produced it (timezone, [{cron, instances}]).
    scheduling          jsonb,
    created_at          timestamptz NOT NULL,
    UNIQUE (template_version_id, name)
);
CREATE UNIQUE INDEX template_version_presets_one_default
    ON template_version_presets (template_version_id) WHERE is_default;

CREATE TABLE template_version_preset_parameters (
    preset_id uuid NOT NULL REFERENCES template_version_presets (id) ON DELETE CASCADE,
    name      text NOT NULL,
    value     text NOT NULL,
    PRIMARY KEY (preset_id, name)
);

ALTER TABLE workspace_builds
    ADD COLUMN template_version_preset_id uuid
        REFERENCES template_version_presets (id) ON DELETE SET NULL;
