use super::*;

fn subject(site: &[&str], orgs: &[(Uuid, &[&str])]) -> Subject {
    Subject {
        user_id: Uuid::new_v4(),
        site_roles: site.iter().map(|s| s.to_string()).collect(),
        orgs: orgs
            .iter()
            .map(|(id, roles)| (*id, roles.iter().map(|s| s.to_string()).collect()))
            .collect(),
        groups: Vec::new(),
    }
}

#[test]
fn members_see_themselves_but_not_others() {
    let org = Uuid::new_v4();
    let me = subject(&[], &[(org, &[])]);
    assert!(me.can(Action::Read, &Object::user(me.user_id)));
    assert_eq!(
        authorize(&me, Action::Read, &Object::user(Uuid::new_v4())),
        Err(Denied::NotFound)
    );
    assert_eq!(
        authorize(&me, Action::Delete, &Object::user(me.user_id)),
        Err(Denied::Forbidden),
        "visible but not deletable by yourself"
    );
}

#[test]
fn owned_objects_need_membership_of_their_organization() {
    let org = Uuid::new_v4();
    let outsider = subject(&[], &[]);
    let ws = Object::owned(Resource::Workspace, Some(org), outsider.user_id);
    assert!(!outsider.can(Action::Read, &ws));
    let insider = Subject {
        orgs: [(org, vec![])].into(),
        ..outsider
    };
    assert!(insider.can(Action::Read, &ws));
}

#[test]
fn organization_roles_stay_in_their_organization() {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let admin_of_a = subject(&[], &[(a, &["organization-admin"]), (b, &[])]);
    let tpl_a = Object::in_org(Resource::Template, a);
    let everyone_uses = Acl {
        users: vec![],
        groups: vec![(b, AclRole::Use)],
    };
    let tpl_b = Object::template(b, everyone_uses);
    assert!(admin_of_a.can(Action::Delete, &tpl_a));
    assert!(admin_of_a.can(Action::Read, &tpl_b));
    assert_eq!(
        authorize(&admin_of_a, Action::Delete, &tpl_b),
        Err(Denied::Forbidden)
    );
    let stranger = subject(&[], &[]);
    assert_eq!(
        authorize(&stranger, Action::Read, &tpl_a),
        Err(Denied::NotFound)
    );
}

#[test]
fn only_owners_hand_out_owner() {
    let user_admin = subject(&["user-admin"], &[]);
    assert!(user_admin.can_assign_site_role("template-admin"));
    assert!(!user_admin.can_assign_site_role("owner"));
    assert!(!user_admin.can_assign_site_role("no-such-role"));
    let owner = subject(&["owner"], &[]);
    assert!(owner.can_assign_site_role("owner"));
    let member = subject(&[], &[]);
    assert!(!member.can_assign_site_role("auditor"));
}

#[test]
fn filters_match_single_decisions() {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let people = [
        subject(&[], &[(a, &[])]),
        subject(&["template-admin"], &[(a, &[])]),
        subject(&[], &[(a, &["organization-admin"]), (b, &[])]),
        subject(&["owner"], &[]),
        subject(&["auditor"], &[(b, &[])]),
    ];
    for who in &people {
        for resource in [Resource::Workspace, Resource::Template, Resource::User] {
            let filter = who.filter(resource);
            let owners = [who.user_id, Uuid::new_v4()];
            for org in [None, Some(a), Some(b), Some(Uuid::new_v4())] {
                for owner in owners.iter().copied().map(Some).chain([None]) {
                    let object = Object {
                        resource,
                        org,
                        owner,
                        acl: None,
                    };
                    assert_eq!(
                        filter.admits(org, owner),
                        who.can(Action::Read, &object),
                        "{who:?} {object:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_system_actor_may_build_any_workspace_and_nothing_more() {
    let system = Subject::system();
    assert!(system.is_system());
    let ws = Object::owned(Resource::Workspace, Some(Uuid::new_v4()), Uuid::new_v4());
    for action in [Action::Read, Action::Update, Action::Delete] {
        assert!(system.can(action, &ws), "{action:?}");
    }
    assert!(!system.can(Action::Connect, &ws), "never into a workspace");
    assert!(!system.can(Action::Create, &ws));
    let key = Object::owned(Resource::ApiKey, None, Uuid::new_v4());
    assert!(!system.can(Action::Read, &key));
    assert!(!system.can(Action::Update, &Object::site(Resource::AssignRole)));
    assert!(system.filter(Resource::Workspace).all);
}

#[test]
fn a_user_cannot_claim_the_system_role() {
    let claimant = subject(&["system"], &[]);
    assert!(!claimant.is_system());
    let ws = Object::owned(Resource::Workspace, Some(Uuid::new_v4()), Uuid::new_v4());
    assert!(!claimant.can(Action::Read, &ws));
}

#[test]
fn templates_are_reached_through_their_access_lists() {
    let org = Uuid::new_v4();
    let team = Uuid::new_v4();
    let member = subject(&[], &[(org, &[])]);
    let in_team = Subject {
        groups: vec![team],
        ..subject(&[], &[(org, &[])])
    };
    let outsider = Subject {
        groups: vec![team],
        ..subject(&[], &[])
    };
    let restricted = Object::template(
        org,
        Acl {
            users: vec![],
            groups: vec![(team, AclRole::Use)],
        },
    );
    assert_eq!(
        authorize(&member, Action::Read, &restricted),
        Err(Denied::NotFound)
    );
    assert!(in_team.can(Action::Use, &restricted));
    assert_eq!(
        authorize(&in_team, Action::Update, &restricted),
        Err(Denied::Forbidden),
        "use is not admin"
    );
    assert!(
        !outsider.can(Action::Read, &restricted),
        "a group entry needs membership of the organization"
    );
    let admin_of_one = Object::template(
        org,
        Acl {
            users: vec![(member.user_id, AclRole::Admin)],
            groups: vec![],
        },
    );
    assert!(member.can(Action::Delete, &admin_of_one));
    assert!(!in_team.can(Action::Read, &admin_of_one));
    let everyone = Object::template(
        org,
        Acl {
            users: vec![],
            groups: vec![(org, AclRole::Use)],
        },
    );
    assert!(member.can(Action::Use, &everyone));
    assert!(!member.can(Action::Use, &Object::in_org(Resource::Template, org)));
    let template_admin = subject(&["template-admin"], &[]);
    assert!(template_admin.can(Action::Update, &restricted));
    let filter = in_team.filter(Resource::Template);
    assert_eq!(filter.acl_groups, vec![team]);
    assert_eq!(filter.acl_orgs, vec![org]);
    assert!(
        Subject::system()
            .filter(Resource::Template)
            .acl_orgs
            .is_empty()
    );
}
