//! The real-estate business behind the assistants: its data ([`model`]), where it is kept
//! ([`store`]), and the tools the assistants use on it.

pub mod model;
pub mod store;

pub use model::*;
pub use store::{PropertyFilter, RealEstateStore};
