-- Groups of users per organization, and templates' access lists (Coder's template ACLs).
--
-- Every organization has the "Everyone" group, whose id is the organization's own id and whose
-- members are the organization's members (never listed in group_members): a trigger creates it
-- with the organization, so every organization always has one to grant templates to.
CREATE TABLE groups (
    id              uuid        PRIMARY KEY,
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text        NOT NULL,
    display_name    text        NOT NULL DEFAULT '',
    avatar_url      text        NOT NULL DEFAULT '',
    quota_allowance integer     NOT NULL DEFAULT 0,
    -- 'user': made through the API; 'oidc': created by OIDC group sync, whose memberships the
    -- identity provider's claim decides at every sign-in.
    source          text        NOT NULL DEFAULT 'user' CHECK (source IN ('user', 'oidc')),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX groups_organization_id_name_key ON groups (organization_id, lower(name));

CREATE TABLE group_members (
    group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX group_members_user_id ON group_members (user_id);

CREATE FUNCTION insert_everyone_group() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO groups (id, organization_id, name) VALUES (NEW.id, NEW.id, 'Everyone');
    RETURN NEW;
END $$;
CREATE TRIGGER organizations_everyone_group AFTER INSERT ON organizations
    FOR EACH ROW EXECUTE FUNCTION insert_everyone_group();
INSERT INTO groups (id, organization_id, name) SELECT id, id, 'Everyone' FROM organizations;

-- Leaving an organization means leaving its groups.
CREATE FUNCTION remove_member_from_org_groups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM group_members gm USING groups g
     WHERE g.id = gm.group_id AND g.organization_id = OLD.organization_id
       AND gm.user_id = OLD.user_id;
    RETURN OLD;
END $$;
CREATE TRIGGER organization_members_leave_groups AFTER DELETE ON organization_members
    FOR EACH ROW EXECUTE FUNCTION remove_member_from_org_groups();

-- Who may use ('use': read and create workspaces) or administer ('admin': everything) a
-- template beyond the organization's template administrators.
CREATE TABLE template_user_acl (
    template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('use', 'admin')),
    PRIMARY KEY (template_id, user_id)
);
CREATE INDEX template_user_acl_user_id ON template_user_acl (user_id);
CREATE TABLE template_group_acl (
    template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    group_id    uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('use', 'admin')),
    PRIMARY KEY (template_id, group_id)
);
CREATE INDEX template_group_acl_group_id ON template_group_acl (group_id);

-- Templates made before access lists stay usable by their organization's members.
INSERT INTO template_group_acl (template_id, group_id, role)
SELECT id, organization_id, 'use' FROM templates;
