//! `search_properties` and `get_property_details`: what the searcher and property assistants
//! answer from. Results are short lines the model can quote, with the ids it needs next.

use crate::realestate::PropertyStore;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, listing_line, unavailable};
use crate::engine::attachments::ASK_PREFIX;
use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::{Operation, Property, PropertyFilter, PropertyType};
use crate::store::{Attachment, ListRow};

/// Most results on one page.
const MAX_PAGE: usize = 10;

pub struct SearchProperties {
    store: Arc<dyn PropertyStore>,
}

impl SearchProperties {
    pub fn new(store: Arc<dyn PropertyStore>) -> Self {
        Self { store }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    #[schemars(description = "Ciudad: Madrid, Valencia, Sevilla, Málaga…")]
    city: Option<String>,
    #[schemars(description = "Barrio, p. ej. Chamberí, Ruzafa, Triana")]
    neighbourhood: Option<String>,
    #[schemars(description = "sale = compra, rent = alquiler")]
    operation: Option<Operation>,
    #[serde(rename = "type")]
    #[schemars(
        description = "flat = piso, penthouse = ático, studio = estudio, duplex, house = casa, office = oficina, commercial = local"
    )]
    kind: Option<PropertyType>,
    #[schemars(description = "Precio mínimo en euros (alquiler: por mes)")]
    #[schemars(range(min = 0))]
    min_price: Option<u64>,
    #[schemars(description = "Precio máximo en euros (alquiler: por mes)")]
    #[schemars(range(min = 0))]
    max_price: Option<u64>,
    #[schemars(range(min = 0))]
    min_bedrooms: Option<u32>,
    #[serde(default)]
    #[schemars(
        description = "Todas deben estar: terraza, ascensor, garaje, piscina, trastero, aire acondicionado, calefacción, amueblado, jardín, portero"
    )]
    amenities: Vec<String>,
    #[serde(default)]
    #[schemars(description = "Cerca de la ubicación que el usuario compartió por WhatsApp")]
    near_me: bool,
    #[schemars(description = "Con near_me; 3 km si no se indica")]
    #[schemars(range(min = 0.1))]
    max_distance_km: Option<f64>,
    sort: Option<Sort>,
    #[schemars(range(min = 1))]
    page: Option<usize>,
    #[schemars(range(min = 1, max = 10))]
    page_size: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    PriceAsc,
    PriceDesc,
    Newest,
    Distance,
}

#[async_trait]
impl TypedTool for SearchProperties {
    type Args = SearchArgs;
    const NAME: &'static str = "search_properties";

    fn description(&self) -> String {
        "Busca propiedades disponibles de la agencia con filtros; devuelve una \
         página de resultados con su id (P-…), precio, habitaciones y tamaño. \
         Usa near_me=true cuando el usuario pida algo «cerca de mí» y haya \
         compartido su ubicación."
            .into()
    }

    async fn call(&self, args: SearchArgs, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        if let (Some(min), Some(max)) = (args.min_price, args.max_price)
            && min > max
        {
            return Err(ToolError::InvalidArgs(format!(
                "min_price {min} is above max_price {max}"
            )));
        }
        let origin = if args.near_me || args.sort == Some(Sort::Distance) {
            Some(context.location.ok_or_else(|| {
                ToolError::InvalidArgs(
                    "the user has not shared a location; ask them to send it with WhatsApp's \
                     📎 → Ubicación, or to name a city or neighbourhood"
                        .into(),
                )
            })?)
        } else {
            None
        };
        let filter = PropertyFilter {
            city: args.city.clone(),
            operation: args.operation,
            available_only: true,
            owner_id: None,
        };
        let mut found: Vec<(Property, Option<f64>)> = self
            .store
            .properties(&filter)
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|p| matches(p, &args))
            .map(|p| {
                let distance = origin.map(|o| o.distance_km(&p.location));
                (p, distance)
            })
            .filter(|(_, distance)| {
                !args.near_me || distance.is_some_and(|d| d <= args.max_distance_km.unwrap_or(3.0))
            })
            .collect();
        let sort = args.sort.unwrap_or(if origin.is_some() {
            Sort::Distance
        } else {
            Sort::PriceAsc
        });
        match sort {
            Sort::PriceAsc => found.sort_by_key(|(p, _)| (p.price, p.id.clone())),
            Sort::PriceDesc => {
                found.sort_by_key(|(p, _)| (std::cmp::Reverse(p.price), p.id.clone()))
            }
            Sort::Newest => found.sort_by_key(|(p, _)| std::cmp::Reverse(p.listed_at)),
            Sort::Distance => {
                found.sort_by(|a, b| a.1.unwrap_or(f64::MAX).total_cmp(&b.1.unwrap_or(f64::MAX)))
            }
        }
        if found.is_empty() {
            return Ok(ToolOutput::from(
                "No hay propiedades disponibles con esos filtros. Propón al usuario ampliar el \
                 presupuesto, la zona o quitar algún requisito."
                    .to_owned(),
            ));
        }
        let size = args.page_size.unwrap_or(5).clamp(1, MAX_PAGE);
        let pages = found.len().div_ceil(size);
        let page = args.page.unwrap_or(1).max(1);
        if page > pages {
            return Err(ToolError::InvalidArgs(format!(
                "page {page} does not exist; there are {pages} page(s) of {size}"
            )));
        }
        let mut out = format!(
            "{} propiedades disponibles (página {page} de {pages}):",
            found.len()
        );
        let shown: Vec<&Property> = found
            .iter()
            .skip((page - 1) * size)
            .take(size)
            .map(|(p, _)| p)
            .collect();
        for (i, (property, distance)) in found.iter().enumerate().skip((page - 1) * size).take(size)
        {
            out.push_str(&format!("\n{}. {}", i + 1, listing_line(property)));
            if !property.amenities.is_empty() {
                out.push_str(&format!(" · {}", property.amenities.join(", ")));
            }
            if let Some(km) = distance {
                out.push_str(&format!(" · a {:.1} km", km).replace('.', ","));
            }
        }
        out.push_str(
            "\nEl usuario recibe además estos resultados como una lista que puede tocar para \
             ver la ficha: no los repitas uno a uno; resume en una o dos frases (cuántos hay, \
             precios, lo que destaca) y pregunta si quiere ver alguno o afinar la búsqueda.",
        );
        let first = (page - 1) * size + 1;
        let text = if pages == 1 {
            "Toca una para ver su ficha.".to_owned()
        } else if page == 1 {
            format!(
                "Las {} primeras de {}: toca una para ver su ficha.",
                shown.len(),
                found.len()
            )
        } else {
            format!(
                "De la {first} a la {} de {}: toca una para ver su ficha.",
                first + shown.len() - 1,
                found.len()
            )
        };
        let attachment = Attachment::List {
            text,
            rows: shown.into_iter().map(row).collect(),
        };
        Ok(ToolOutput {
            text: out,
            attachments: vec![attachment],
            events: Vec::new(),
        })
    }
}

/// The assistant a tapped result asks for its listing.
pub const DETAILS_AGENT: &str = "property_assistant";

/// A search result as a list row: its id and price, then where and how big.
fn row(property: &Property) -> ListRow {
    ListRow {
        id: format!("{ASK_PREFIX}{DETAILS_AGENT}:{}", property.id),
        title: format!("{} · {}", property.id, text::price(property)),
        description: format!(
            "{}, {} · 🛏 {} · {} m²",
            property.neighbourhood, property.city, property.bedrooms, property.area_m2
        ),
    }
}

/// The filters the store does not apply.
fn matches(property: &Property, args: &SearchArgs) -> bool {
    let same =
        |a: &str, b: &str| crate::agents::keywords::tokens(a) == crate::agents::keywords::tokens(b);
    args.neighbourhood
        .as_deref()
        .is_none_or(|n| same(n, &property.neighbourhood))
        && args.kind.is_none_or(|k| k == property.kind)
        && args.min_price.is_none_or(|min| property.price >= min)
        && args.max_price.is_none_or(|max| property.price <= max)
        && args.min_bedrooms.is_none_or(|min| property.bedrooms >= min)
        && args
            .amenities
            .iter()
            .all(|wanted| property.amenities.iter().any(|have| same(have, wanted)))
}

pub struct GetPropertyDetails {
    store: Arc<dyn PropertyStore>,
}

impl GetPropertyDetails {
    pub fn new(store: Arc<dyn PropertyStore>) -> Self {
        Self { store }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DetailsArgs {
    #[schemars(description = "Id de la propiedad, p. ej. P-1001")]
    property_id: String,
}

#[async_trait]
impl TypedTool for GetPropertyDetails {
    type Args = DetailsArgs;
    const NAME: &'static str = "get_property_details";

    fn description(&self) -> String {
        "Ficha completa de una propiedad por su id (P-…): descripción, \
         dirección, características, estado y precio."
            .into()
    }

    async fn call(
        &self,
        args: DetailsArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let p = text::listing(self.store.as_ref(), &args.property_id).await?;
        let status = match p.status {
            crate::realestate::ListingStatus::Available => "disponible",
            crate::realestate::ListingStatus::Reserved => {
                "reservada (no admite visitas ni ofertas)"
            }
            crate::realestate::ListingStatus::Sold => "vendida",
            crate::realestate::ListingStatus::Rented => "alquilada",
            crate::realestate::ListingStatus::Withdrawn => "retirada del mercado",
        };
        let days = (context.now - p.listed_at).num_days().max(0);
        let mut out = format!(
            "{} — {}\n{} en {} de {} ({}, {}).\nPrecio: {} · Estado: {status}\n{} habitaciones · {} baños · {} m²",
            p.id,
            p.title,
            p.kind.label_es(),
            p.operation.label_es(),
            p.address,
            p.neighbourhood,
            p.city,
            text::price(&p),
            p.bedrooms,
            p.bathrooms,
            p.area_m2
        );
        if !p.amenities.is_empty() {
            out.push_str(&format!("\nExtras: {}", p.amenities.join(", ")));
        }
        out.push_str(&format!(
            "\n{}\nPublicada hace {days} días.",
            p.description_in(context.lang.as_deref())
        ));
        if p.photos.is_empty() {
            out.push_str("\nSin fotos en la ficha.");
        } else {
            out.push_str(&format!(
                "\nFotos: {} (se envían con send_property_photos).",
                p.photos.len()
            ));
        }
        Ok(out.into())
    }
}
