//! The buttons under a listing shown to a customer: ask for a visit and, for a sale, a
//! mortgage estimate. The same whether a model or the offline engine showed the listing, and
//! each asks the assistant that serves it (`ask:<agent>:<id>`), whatever its words. Under a
//! listing's photos they make the photos one carousel with a tap to book.

use crate::engine::attachments::ASK_PREFIX;
use crate::store::{Attachment, ReplyButton};

/// «Would you like to visit it?», with its buttons, in `lang` (es, en, pt; else Spanish).
pub fn for_listing(id: &str, for_sale: bool, lang: &str) -> Attachment {
    let (question, visit, mortgage) = match lang {
        "en" => (
            "Would you like to visit it?",
            "Book a visit",
            "Mortgage estimate",
        ),
        "pt" => ("Quer visitá-lo?", "Quero visitar", "Simular crédito"),
        _ => (
            "¿Quieres visitarlo?",
            "Quiero visitarlo",
            "Calcular hipoteca",
        ),
    };
    let mut buttons = vec![ReplyButton::new(
        format!("{ASK_PREFIX}appointment_assistant:{id}"),
        visit,
    )];
    if for_sale {
        buttons.push(ReplyButton::new(
            format!("{ASK_PREFIX}mortgage_loan_assistant:{id}"),
            mortgage,
        ));
    }
    Attachment::Buttons {
        text: question.to_owned(),
        buttons,
    }
}

/// Whether `attachment` is one [`for_listing`] made: the listing's buttons were shown.
pub fn is_listing_buttons(attachment: &Attachment) -> bool {
    matches!(attachment, Attachment::Buttons { buttons, .. }
        if buttons.first().is_some_and(|b| b.id.starts_with(&format!("{ASK_PREFIX}appointment_assistant:"))))
}
