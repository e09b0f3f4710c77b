DROP TABLE template_group_acl;
DROP TABLE template_user_acl;
DROP TRIGGER organization_members_leave_groups ON organization_members;
DROP FUNCTION remove_member_from_org_groups();
DROP TRIGGER organizations_everyone_group ON organizations;
DROP FUNCTION insert_everyone_group();
DROP TABLE group_members;
DROP TABLE groups;
