DROP TRIGGER users_status_changes ON users;
DROP FUNCTION record_user_status_change();
DROP TABLE user_status_changes;
DROP TABLE usage_daily;
DROP TABLE usage_hourly;
