use super::*;

fn team() -> Team {
    Team::in_memory(Some(Arc::new(SecretString::from(
        "bootstrap-token-of-at-least-32-chars".to_owned(),
    ))))
}

#[tokio::test]
async fn names_are_checked_and_unique() {
    let team = team();
    let now = Utc::now();
    assert!(matches!(
        team.add("admin", OperatorRole::Admin, None, "cli", now)
            .await,
        Err(TeamError::BadName(_))
    ));
    assert!(matches!(
        team.add("Ana López", OperatorRole::Viewer, None, "cli", now)
            .await,
        Err(TeamError::BadName(_))
    ));
    let issued = team
        .add("Lucía", OperatorRole::Operator, None, "cli", now)
        .await
        .unwrap();
    assert_eq!(issued.name, "lucía");
    assert!(matches!(
        team.add("lucía", OperatorRole::Viewer, None, "cli", now)
            .await,
        Err(TeamError::Exists(_))
    ));
    let stored = team.store().operator("lucía").await.unwrap().unwrap();
    assert_ne!(stored.password_hash, issued.password);
    assert_ne!(stored.token_hash, issued.token);
}

#[tokio::test]
async fn a_session_ends_at_sign_out_disable_and_reset() {
    let team = team();
    let now = Utc::now();
    let issued = team
        .add("marta", OperatorRole::Viewer, None, "cli", now)
        .await
        .unwrap();
    assert!(team.sign_in("marta", "wrong", now).await.unwrap().is_none());
    assert!(
        team.sign_in("nobody", &issued.password, now)
            .await
            .unwrap()
            .is_none()
    );
    let (signed, cookie) = team
        .sign_in("Marta", &issued.password, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(signed.identity.role, OperatorRole::Viewer);
    assert!(team.session(&cookie, now).await.unwrap().is_some());
    assert!(
        team.session(&cookie, now + SESSION_LIFETIME)
            .await
            .unwrap()
            .is_none(),
        "expired"
    );
    team.sign_out(&signed.id).await.unwrap();
    assert!(
        team.session(&cookie, now).await.unwrap().is_none(),
        "signed out"
    );

    let (_, cookie) = team
        .sign_in("marta", &issued.password, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(team.disable("marta", "admin", now).await.unwrap(), 1);
    assert!(
        team.session(&cookie, now).await.unwrap().is_none(),
        "disabled"
    );
    assert!(
        team.sign_in("marta", &issued.password, now)
            .await
            .unwrap()
            .is_none()
    );
    assert!(team.bearer(&issued.token).await.unwrap().is_none());

    let again = team.reset("marta", "admin", now).await.unwrap();
    assert!(
        team.sign_in("marta", &issued.password, now)
            .await
            .unwrap()
            .is_none(),
        "old password"
    );
    assert!(
        team.bearer(&issued.token).await.unwrap().is_none(),
        "old token"
    );
    assert_eq!(
        team.bearer(&again.token).await.unwrap().map(|i| i.name),
        Some("marta".to_owned())
    );
    assert!(
        team.sign_in("marta", &again.password, now)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn the_bootstrap_token_is_the_admin_and_changing_it_ends_its_sessions() {
    let team = team();
    let now = Utc::now();
    let (signed, cookie) = team
        .sign_in("admin", "bootstrap-token-of-at-least-32-chars", now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(signed.identity.role, OperatorRole::Admin);
    assert!(team.session(&cookie, now).await.unwrap().is_some());
    let rotated = Team::new(
        team.store.clone(),
        Some(Arc::new(SecretString::from(
            "another-token-of-at-least-32-chars".to_owned(),
        ))),
    );
    assert!(rotated.session(&cookie, now).await.unwrap().is_none());
    assert!(
        team.bearer("bootstrap-token-of-at-least-32-chars")
            .await
            .unwrap()
            .is_some()
    );
    assert!(team.bearer("").await.unwrap().is_none());
    assert!(team.session("not a cookie", now).await.unwrap().is_none());
}
