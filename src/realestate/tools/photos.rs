//! `send_property_photos`: the property assistant shows a listing's photos. They go to the
//! customer as WhatsApp image messages right after the assistant's words, each with a caption,
//! through the outbox like any reply; the model only reads how many were sent.

use crate::realestate::PropertyStore;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{listing_buttons, text};
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{ListingStatus, Operation};
use crate::store::Attachment;

pub const SEND_PROPERTY_PHOTOS: &str = "send_property_photos";

/// Photos sent when the model does not say, and the most in one reply.
const DEFAULT_PHOTOS: usize = 3;
pub const MAX_PHOTOS: usize = 5;

pub struct SendPropertyPhotos {
    store: Arc<dyn PropertyStore>,
}

impl SendPropertyPhotos {
    pub fn new(store: Arc<dyn PropertyStore>) -> Self {
        Self { store }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PhotosArgs {
    #[schemars(description = "Id de la propiedad, p. ej. P-1001")]
    property_id: String,
    #[schemars(description = "Cuántas (3 si no se indica)")]
    #[schemars(range(min = 1, max = 5))]
    count: Option<usize>,
    /// 1-based: the photo to start from, for «¿tienes más?».
    #[schemars(description = "Desde qué foto (1 = la portada)")]
    #[schemars(range(min = 1))]
    from: Option<usize>,
}

#[async_trait]
impl TypedTool for SendPropertyPhotos {
    type Args = PhotosArgs;
    const NAME: &'static str = SEND_PROPERTY_PHOTOS;

    fn description(&self) -> String {
        "Envía al usuario por WhatsApp las fotos de una propiedad (P-…), como \
         imágenes con su pie, justo después de tu respuesta. Para «¿tienes \
         más?», pide las siguientes con `from`."
            .into()
    }

    async fn call(&self, args: PhotosArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let property = text::listing(self.store.as_ref(), &args.property_id).await?;
        let total = property.photos.len();
        if total == 0 {
            return Err(ToolError::Failed(format!(
                "{} has no photos in its listing; say so, and offer that an agent sends them \
                 (request_human) if the user wants",
                property.id
            )));
        }
        let from = args.from.unwrap_or(1).max(1);
        if from > total {
            return Err(ToolError::InvalidArgs(format!(
                "{} has {total} photo(s); `from` {from} is past the last",
                property.id
            )));
        }
        let count = args.count.unwrap_or(DEFAULT_PHOTOS).clamp(1, MAX_PHOTOS);
        let mut attachments: Vec<Attachment> = property
            .photos
            .iter()
            .enumerate()
            .skip(from - 1)
            .take(count)
            .map(|(i, link)| Attachment::Image {
                link: link.clone(),
                caption: format!("{} · {} ({}/{total})", property.id, property.title, i + 1),
            })
            .collect();
        let last = from - 1 + attachments.len();
        let shown = attachments.len();
        // A listing that can be visited: a tap to book under its photos (one carousel).
        let bookable = property.status == ListingStatus::Available;
        if bookable {
            attachments.push(listing_buttons::for_listing(
                &property.id,
                property.operation == Operation::Sale,
                context.lang.as_deref().unwrap_or("es"),
            ));
        }
        let more = if last < total {
            format!(" Quedan {} más (from={}).", total - last, last + 1)
        } else {
            String::new()
        };
        Ok(ToolOutput {
            text: format!(
                "Se envían al usuario {shown} foto(s) de {} ({from}–{last} de {total}) justo \
                 después de tu respuesta: no pegues enlaces; di en una frase que van las \
                 fotos.{more}",
                property.id
            ),
            attachments,
            events: Vec::new(),
        })
    }
}
