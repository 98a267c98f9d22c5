//! MongoStore's `messages`: each conversation's history, numbered.

use crate::domain::WaId;
use crate::store::mongo::MAX_INSERT_RACES;
use crate::store::mongo::codec::{Fields, date, message_doc, stored_message};
use crate::store::pool::{self, Find, Lane, classify};
use crate::store::{MongoStore, NewMessage, StoreResult, StoredMessage};
use async_trait::async_trait;
use bson::{Document, doc};

use crate::store::HistoryStore;

#[async_trait]
impl HistoryStore for MongoStore {
    async fn messages_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "messages",
                doc! {
                    "at": {"$gte": date(from), "$lt": date(to)},
                    "role": {"$in": ["human", "ai"]},
                },
                Find::sorted(doc! {"at": 1}).limit(limit),
            )
            .await?;
        docs.iter().map(stored_message).collect()
    }

    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage> {
        // Next seq = last + 1, claimed by the insert itself: the unique `{wa_id, seq}` index
        // lets exactly one writer have each number. (A read-modify-write counter is not atomic
        // on every MongoDB-compatible server; a unique insert is.)
        for _ in 0..MAX_INSERT_RACES {
            let last = self
                .pool
                .find_one(
                    Lane::Work,
                    "messages",
                    doc! {"wa_id": message.wa_id.as_str()},
                    Find::sorted(doc! {"seq": -1}).projection(doc! {"seq": 1}),
                )
                .await?;
            let seq = last.and_then(|d| Fields(&d).int("seq")).unwrap_or(0) + 1;
            if self
                .pool
                .insert_unique(Lane::Work, "messages", message_doc(seq, &message)?)
                .await?
            {
                return Ok(StoredMessage { seq, message });
            }
        }
        Err(anyhow::anyhow!("{MAX_INSERT_RACES} concurrent writers took every next seq").into())
    }

    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "messages",
                doc! {"wa_id": wa_id.as_str()},
                Find::sorted(doc! {"seq": -1}).limit(limit),
            )
            .await?;
        docs.iter().rev().map(stored_message).collect()
    }

    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        let Some(first) = messages.first() else {
            return Ok(Vec::new());
        };
        let wa_id = first.wa_id.clone();
        let mut after = after;
        // The numbers after `after` are claimed by the insert itself: the unique
        // `{wa_id, seq}` index lets exactly one writer have each. Under the conversation's lease
        // nobody else writes; a race is a takeover's, and is retried after the real last.
        for _ in 0..MAX_INSERT_RACES {
            let stored: Vec<StoredMessage> = messages
                .iter()
                .zip(after + 1..)
                .map(|(message, seq)| StoredMessage {
                    seq,
                    message: message.clone(),
                })
                .collect();
            let docs = stored
                .iter()
                .map(|m| message_doc(m.seq, &m.message))
                .collect::<StoreResult<Vec<Document>>>()?;
            let inserted = self
                .pool
                .run_raw(Lane::Work, ("insert", "messages"), move |db| async move {
                    db.collection::<Document>("messages")
                        .insert_many(docs)
                        .await
                })
                .await?;
            match inserted {
                Ok(_) => return Ok(stored),
                Err(error) if pool::is_duplicate_key(&error) => {
                    let last = self
                        .pool
                        .find_one(
                            Lane::Work,
                            "messages",
                            doc! {"wa_id": wa_id.as_str()},
                            Find::sorted(doc! {"seq": -1}).projection(doc! {"seq": 1}),
                        )
                        .await?;
                    let last = last.and_then(|d| Fields(&d).int("seq")).unwrap_or(0);
                    // Part of the batch may have landed (an ordered insert stops at the
                    // first duplicate): only what lies beyond the real last is ours to write.
                    if last <= after {
                        return Err(anyhow::anyhow!(
                            "messages of {} clash below seq {after}",
                            wa_id.masked()
                        )
                        .into());
                    }
                    after = last;
                }
                Err(error) => return Err(classify(error)),
            }
        }
        Err(anyhow::anyhow!("{MAX_INSERT_RACES} concurrent writers took every next seq").into())
    }
}
