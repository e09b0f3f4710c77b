-- Who used which template's workspaces, and how, kept as rollups the insights read instead of
-- raw events: one row per hour (the edges of a report's range) and one per UTC day (its
-- body, with a bitmask of the hours that saw use, so a day in any time zone can be told from
-- it). Both are written together as the relay records use; seconds are capped per bucket.
CREATE TABLE usage_hourly (
    hour                  timestamptz NOT NULL,
    template_id           uuid        NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    user_id               uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    usage_secs            integer     NOT NULL DEFAULT 0,
    ssh_secs              integer     NOT NULL DEFAULT 0,
    reconnecting_pty_secs integer     NOT NULL DEFAULT 0,
    vscode_secs           integer     NOT NULL DEFAULT 0,
    jetbrains_secs        integer     NOT NULL DEFAULT 0,
    app_secs              integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, template_id, user_id)
);

CREATE TABLE usage_daily (
    day                   date        NOT NULL,
    template_id           uuid        NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    user_id               uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Bit h is set when the user was active in UTC hour h of the day.
    active_hours          integer     NOT NULL DEFAULT 0,
    usage_secs            integer     NOT NULL DEFAULT 0,
    ssh_secs              integer     NOT NULL DEFAULT 0,
    reconnecting_pty_secs integer     NOT NULL DEFAULT 0,
    vscode_secs           integer     NOT NULL DEFAULT 0,
    jetbrains_secs        integer     NOT NULL DEFAULT 0,
    app_secs              integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (day, template_id, user_id)
);

-- Each change of a user's status, for the status counts over time. Written by a trigger, so
-- every path that changes a status (API, dashboard, SSO, dormancy) is counted alike.
CREATE TABLE user_status_changes (
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    new_status text        NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_status_changes_changed_at ON user_status_changes (changed_at);

INSERT INTO user_status_changes (user_id, new_status, changed_at)
    SELECT id, status, created_at FROM users WHERE NOT deleted;

CREATE FUNCTION record_user_status_change() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
        INSERT INTO user_status_changes (user_id, new_status) VALUES (NEW.id, NEW.status);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.deleted AND NOT OLD.deleted THEN
        INSERT INTO user_status_changes (user_id, new_status) VALUES (NEW.id, 'deleted');
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER users_status_changes
    AFTER INSERT OR UPDATE OF status, deleted ON users
    FOR EACH ROW EXECUTE FUNCTION record_user_status_change();
