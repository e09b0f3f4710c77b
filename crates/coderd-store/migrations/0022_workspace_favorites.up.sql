-- A workspace its owner pinned: listed first for them (Coder's favorites).
ALTER TABLE workspaces ADD COLUMN favorite boolean NOT NULL DEFAULT false;
-- An owner's list puts their favorites first; walking this index keeps that page a short
-- index scan, as the (deleted, owner, name) index does for the plain name order.
CREATE INDEX workspaces_deleted_owner_favorite_name
    ON workspaces (deleted, owner_id, favorite DESC, lower(name));
