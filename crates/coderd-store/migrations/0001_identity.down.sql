DROP TABLE site_configs;
DROP TABLE api_keys;
DROP TABLE organization_members;
DROP TABLE users;
DROP TABLE organizations;
