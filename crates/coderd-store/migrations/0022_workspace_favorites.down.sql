DROP INDEX workspaces_deleted_owner_favorite_name;
ALTER TABLE workspaces DROP COLUMN favorite;
