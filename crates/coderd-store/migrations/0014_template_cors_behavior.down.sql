ALTER TABLE templates DROP COLUMN cors_behavior;
