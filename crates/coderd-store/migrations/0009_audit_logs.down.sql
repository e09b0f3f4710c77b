DROP TABLE audit_logs;
