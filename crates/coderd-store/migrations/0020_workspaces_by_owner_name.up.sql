-- Workspace lists walk one owner's workspaces in name order. The unique index on
-- (owner_id, lower(name)) only covers live workspaces, so a statement whose `deleted` is a
-- parameter (one generic plan for both cases) can never use it and sorts every visible
-- workspace instead. This one covers both, so the walk stops after a page.
CREATE INDEX workspaces_deleted_owner_name ON workspaces (deleted, owner_id, lower(name));
