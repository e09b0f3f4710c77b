-- Each user's own settings (theme, terminal font, quiet hours), as Coder keeps them: one row
-- per setting, so a new setting needs no migration and the users table keeps its shape.
CREATE TABLE user_configs (
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (user_id, key)
);
