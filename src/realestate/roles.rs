//! Who is who by the business's data: a number that is an owner's (`owners.wa_id`) talks to the
//! assistants as an owner, one of the agency's staff (`staff.wa_id`) as an agent. The engine's
//! [`RoleDirectory`](crate::engine::roles::RoleDirectory) reads them through [`DataRoles`], and
//! the handoff desk the staff it tells.

use crate::realestate::{OwnerStore, StaffStore};
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::RealEstateStore;
use crate::domain::{Role, WaId};
use crate::engine::handoff::{StaffOnCall, StaffRoster};
use crate::engine::roles::KnownNumbers;
use crate::store::StoreResult;

/// The business's data as the numbers with a role.
pub struct DataRoles<S: ?Sized = dyn RealEstateStore>(pub Arc<S>);

#[async_trait]
impl<S: OwnerStore + StaffStore + ?Sized> KnownNumbers for DataRoles<S> {
    /// Owners, then staff: a number in both is an agent.
    async fn known_numbers(&self) -> StoreResult<HashMap<WaId, Role>> {
        let mut roles = HashMap::new();
        for owner in self.0.owners_on_whatsapp().await? {
            if let Some(wa_id) = owner.wa_id {
                roles.insert(wa_id, Role::Owner);
            }
        }
        for member in self.0.staff().await? {
            if !member.is_active() {
                continue;
            }
            if let Some(wa_id) = member.wa_id {
                roles.insert(wa_id, Role::Agent);
            }
        }
        Ok(roles)
    }
}

#[async_trait]
impl<S: OwnerStore + StaffStore + ?Sized> StaffRoster for DataRoles<S> {
    /// Staff with `notify_handoffs` and a number, by id; hours that do not read are reported
    /// and taken as the agency's.
    async fn handoff_staff(&self) -> StoreResult<Vec<StaffOnCall>> {
        Ok(self
            .0
            .staff()
            .await?
            .into_iter()
            .filter(|member| member.notify_handoffs && member.is_active())
            .filter_map(|member| {
                let wa_id = member.wa_id?;
                let hours = member.hours.as_ref().and_then(|days| {
                    crate::business::week_from(days)
                        .map_err(|error| {
                            tracing::warn!(staff = %member.id, "staff.hours ignored: {error}")
                        })
                        .ok()
                });
                Some(StaffOnCall {
                    id: member.id,
                    name: member.name,
                    wa_id,
                    hours,
                    works_holidays: member.works_holidays,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::roles::RoleDirectory;
    use crate::realestate::store::{OwnerStore, StaffStore};
    use crate::realestate::{MemoryRealEstate, Owner, StaffMember};
    use std::time::Duration;

    fn wa(id: &str) -> WaId {
        WaId::parse(id).unwrap()
    }

    #[tokio::test]
    async fn owners_and_staff_are_known_and_a_change_shows_after_the_refresh() {
        let data = Arc::new(MemoryRealEstate::new());
        data.upsert_owners(&[
            Owner {
                id: "O-01".into(),
                name: "Carmen".into(),
                wa_id: Some(wa("34600000001")),
                agent_id: None,
            },
            Owner {
                id: "O-02".into(),
                name: "Sin WhatsApp".into(),
                wa_id: None,
                agent_id: None,
            },
        ])
        .await
        .unwrap();
        data.upsert_staff(&[StaffMember {
            id: "A-01".into(),
            name: "Lucía".into(),
            wa_id: Some(wa("34699000001")),
            notify_handoffs: false,
            hours: None,
            works_holidays: false,
            ..StaffMember::default()
        }])
        .await
        .unwrap();
        let directory = RoleDirectory::refreshed_every(
            Arc::new(DataRoles(data.clone())),
            Duration::from_millis(100),
        );
        assert_eq!(
            directory.role_of(&wa("34600000001")).await,
            Some(Role::Owner)
        );
        assert_eq!(
            directory.role_of(&wa("34699000001")).await,
            Some(Role::Agent)
        );
        assert_eq!(
            directory.role_of(&wa("34611000001")).await,
            Some(Role::Prospect)
        );
        // The owner's number moves to someone else: seen once the numbers are read again.
        data.upsert_owners(&[Owner {
            id: "O-01".into(),
            name: "Carmen".into(),
            wa_id: Some(wa("34611000001")),
            agent_id: None,
        }])
        .await
        .unwrap();
        assert_eq!(
            directory.role_of(&wa("34600000001")).await,
            Some(Role::Owner)
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(
            directory.role_of(&wa("34600000001")).await,
            Some(Role::Prospect)
        );
        assert_eq!(
            directory.role_of(&wa("34611000001")).await,
            Some(Role::Owner)
        );
    }
}
