DROP TABLE user_links;
