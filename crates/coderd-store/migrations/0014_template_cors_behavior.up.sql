-- How the app proxy treats cross-origin requests to a template's workspace apps (Coder's
-- `cors_behavior`): `simple` answers them itself (apps of the same user may call each other),
-- `passthru` leaves CORS entirely to the app.
ALTER TABLE templates
    ADD COLUMN cors_behavior text NOT NULL DEFAULT 'simple'
        CHECK (cors_behavior IN ('simple', 'passthru'));
