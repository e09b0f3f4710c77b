DROP TABLE user_configs;
