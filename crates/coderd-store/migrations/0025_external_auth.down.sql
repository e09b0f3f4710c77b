DROP TABLE gitsshkeys;
DROP TABLE external_auth_links;
