//! The approved WhatsApp templates, as configuration: `templates.toml` in the prompts folder
//! lists, for each purpose the service writes first for (a visit reminder, a listing alert,
//! re-engagement, a staff member's handoff notice, an operator's follow-up) and each language a
//! contact may speak, the template's name, the language it was approved in, its category
//! (Meta bills utility and marketing templates differently) and which values fill its
//! `{{1}}`, `{{2}}`…, with a fallback language. Checked by `zaguan prompts check` and `zaguan
//! templates check`, reloaded with the prompts. Without the file, the environment's single
//! templates (`WHATSAPP_REMINDER_TEMPLATE`, `WHATSAPP_ALERT_TEMPLATE`,
//! `WHATSAPP_HANDOFF_TEMPLATE`) stand for their purposes in their one language.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// The file's name in the prompts folder.
pub const TEMPLATES_FILE: &str = "templates.toml";

/// What a template is sent for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    VisitReminder,
    ListingAlert,
    /// A reply to a customer whose window closed (a message delivered late, or answered
    /// late): an invitation to write again.
    ReEngagement,
    StaffHandoff,
    OperatorFollowUp,
    /// To an agent: a visit of theirs booked, moved or cancelled.
    StaffVisit,
    /// To an agent after a visit: how did it go (done, no-show, cancelled).
    VisitOutcome,
    /// To a customer after a visit: how did it go.
    VisitFeedback,
    /// To an owner (or the listing's agent): an offer on their listing.
    OfferReceived,
    /// To a customer: the owner's answer to their offer.
    OfferAnswer,
    /// To a portal's lead: their enquiry about a listing, answered on WhatsApp.
    LeadFirstContact,
}

impl Purpose {
    pub const ALL: [Purpose; 11] = [
        Purpose::VisitReminder,
        Purpose::ListingAlert,
        Purpose::ReEngagement,
        Purpose::StaffHandoff,
        Purpose::OperatorFollowUp,
        Purpose::StaffVisit,
        Purpose::VisitOutcome,
        Purpose::VisitFeedback,
        Purpose::OfferReceived,
        Purpose::OfferAnswer,
        Purpose::LeadFirstContact,
    ];

    /// As the file and the metrics name it.
    pub fn key(self) -> &'static str {
        match self {
            Purpose::VisitReminder => "visit_reminder",
            Purpose::ListingAlert => "listing_alert",
            Purpose::ReEngagement => "re_engagement",
            Purpose::StaffHandoff => "staff_handoff",
            Purpose::OperatorFollowUp => "operator_follow_up",
            Purpose::StaffVisit => "staff_visit",
            Purpose::VisitOutcome => "visit_outcome",
            Purpose::VisitFeedback => "visit_feedback",
            Purpose::OfferReceived => "offer_received",
            Purpose::OfferAnswer => "offer_answer",
            Purpose::LeadFirstContact => "lead_first_contact",
        }
    }

    pub fn parse(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.key() == key)
    }

    /// The values this purpose provides, by name, for a template's `parameters`.
    pub fn values(self) -> &'static [&'static str] {
        match self {
            Purpose::VisitReminder => &["property", "when", "address", "business"],
            Purpose::ListingAlert => &["title", "price", "reference", "business"],
            Purpose::ReEngagement => &["name", "business"],
            Purpose::StaffHandoff => &["customer", "reason", "link"],
            Purpose::OperatorFollowUp => &["name", "business", "operator"],
            Purpose::StaffVisit => &[
                "change", "customer", "phone", "property", "address", "when", "link",
            ],
            Purpose::VisitOutcome => &["customer", "property", "when"],
            Purpose::VisitFeedback => &["property", "business"],
            Purpose::OfferReceived => &["property", "amount", "conditions", "business"],
            Purpose::OfferAnswer => &["property", "answer", "amount", "business"],
            Purpose::LeadFirstContact => &["name", "property", "business", "portal"],
        }
    }

    /// Whether it writes to a customer first, which an opt-out stops: everything but the
    /// staff notices, which go to staff. A re-engagement or an operator's follow-up reaches
    /// a customer whose window has closed, so it is outreach too; so is an offer's notice to
    /// an owner, who is a contact like any other (an opted-out owner's goes to the agent).
    pub fn is_outreach(self) -> bool {
        !matches!(
            self,
            Purpose::StaffHandoff | Purpose::StaffVisit | Purpose::VisitOutcome
        )
    }
}

/// What fills a template's parameter: words, or a moment, written in the template's own
/// language when it is filled (an English reminder says «Thursday 3 December at 10:00», not
/// «03/12 a las 10:00»).
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateValue {
    Text(String),
    /// A local time of the business.
    Moment(chrono::NaiveDateTime),
    /// The ids of the message's buttons: the payloads of the template's quick replies.
    Buttons(Vec<String>),
}

impl TemplateValue {
    /// As `language` (`es`, `en_US`, `pt_PT`…) writes it.
    fn in_language(&self, language: &str) -> String {
        match self {
            TemplateValue::Text(text) => text.clone(),
            TemplateValue::Moment(at) => {
                let lang: String = language.chars().take(2).collect();
                crate::domain::phrases::moment(Some(&lang), *at)
            }
            TemplateValue::Buttons(_) => String::new(),
        }
    }
}

impl From<String> for TemplateValue {
    fn from(text: String) -> Self {
        TemplateValue::Text(text)
    }
}

impl From<&str> for TemplateValue {
    fn from(text: &str) -> Self {
        TemplateValue::Text(text.to_owned())
    }
}

/// Meta's template categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Utility,
    Marketing,
    Authentication,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Utility => "utility",
            Category::Marketing => "marketing",
            Category::Authentication => "authentication",
        }
    }

    /// Meta's spelling (`UTILITY`), as the account's template list and webhooks say it.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "utility" => Some(Category::Utility),
            "marketing" => Some(Category::Marketing),
            "authentication" => Some(Category::Authentication),
            _ => None,
        }
    }
}

/// One approved template for one purpose in one language.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateSpec {
    pub name: String,
    /// The language code it was approved in (`es`, `en_US`, `pt_BR`…).
    pub language: String,
    pub category: Category,
    /// The purpose's values that fill `{{1}}`, `{{2}}`…, in order.
    pub parameters: Vec<String>,
    /// What stands in for a value the service does not have (a contact without a profile
    /// name, a listing gone): Meta refuses a template with an empty parameter, so a value
    /// missing without one keeps the message from being sent at all.
    pub fallbacks: BTreeMap<String, String>,
    /// How many quick-reply buttons the approved template has (`quick_replies`): each is
    /// sent with the payload of the message's button in its place.
    pub quick_replies: usize,
}

impl TemplateSpec {
    /// The parameters' values, from what the purpose provides (`values` by name), a missing or
    /// empty one replaced by its declared fallback; the first parameter with neither.
    pub fn fill(&self, values: &[(&str, TemplateValue)]) -> Result<Vec<String>, String> {
        self.parameters
            .iter()
            .map(|name| {
                let given = values
                    .iter()
                    .find(|(key, _)| key == name)
                    .map(|(_, value)| template_text(&value.in_language(&self.language)))
                    .filter(|value| !value.is_empty());
                given
                    .or_else(|| self.fallbacks.get(name).map(|f| template_text(f)))
                    .filter(|value| !value.is_empty())
                    .ok_or_else(|| name.clone())
            })
            .collect()
    }

    /// A spec with no fallbacks (the environment's single templates).
    pub fn new(
        name: impl Into<String>,
        language: impl Into<String>,
        category: Category,
        parameters: Vec<String>,
    ) -> Self {
        Self {
            name: name.into(),
            language: language.into(),
            category,
            parameters,
            fallbacks: BTreeMap::new(),
            quick_replies: 0,
        }
    }
}

/// A parameter as Meta takes it: no newlines or tabs, no more than four spaces in a row
/// (error 132018), at most 1024 characters.
fn template_text(value: &str) -> String {
    let text = value.split_whitespace().collect::<Vec<_>>().join(" ");
    text.chars().take(1024).collect()
}

/// Every template the service may send, by purpose and by the contact's language.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Templates {
    /// The language used when a contact's has no template (ISO 639-1).
    pub fallback_language: String,
    /// `(purpose, language)` → template, `language` being the contact's (ISO 639-1).
    pub entries: BTreeMap<(Purpose, String), TemplateSpec>,
    /// Whether the file gave these (else the environment's defaults).
    pub from_file: bool,
}

/// One thing wrong in the templates file: its 1-based line and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplatesProblem {
    pub line: usize,
    pub message: String,
}

impl Templates {
    /// The template for `purpose` in `lang`, else in the fallback language.
    pub fn for_purpose(&self, purpose: Purpose, lang: Option<&str>) -> Option<&TemplateSpec> {
        lang.and_then(|lang| self.entries.get(&(purpose, lang.to_owned())))
            .or_else(|| self.entries.get(&(purpose, self.fallback_language.clone())))
    }

    /// The same, skipping the templates `usable` refuses (paused, rejected): a paused English
    /// reminder falls back to the Spanish one.
    pub fn usable_for(
        &self,
        purpose: Purpose,
        lang: Option<&str>,
        usable: impl Fn(&TemplateSpec) -> bool,
    ) -> Option<&TemplateSpec> {
        let own = lang.and_then(|lang| self.entries.get(&(purpose, lang.to_owned())));
        let fallback = self.entries.get(&(purpose, self.fallback_language.clone()));
        own.into_iter().chain(fallback).find(|spec| usable(spec))
    }

    /// Adds `spec` for `purpose` in `lang` unless the file already has that purpose.
    pub fn with_default(mut self, purpose: Purpose, lang: &str, spec: TemplateSpec) -> Self {
        if !self.entries.keys().any(|(p, _)| *p == purpose) {
            self.entries.insert((purpose, lang.to_owned()), spec);
        }
        self
    }
}

/// Reads a templates file; every problem found, with its line, or the templates.
pub fn parse(text: &str) -> Result<Templates, Vec<TemplatesProblem>> {
    let line_at = |offset: usize| 1 + text[..offset.min(text.len())].matches('\n').count();
    let raw: RawTemplates = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(error) => {
            let line = error.span().map_or(1, |span| line_at(span.start));
            return Err(vec![TemplatesProblem {
                line,
                message: error.message().trim().to_owned(),
            }]);
        }
    };
    let mut problems = Vec::new();
    let mut entries = BTreeMap::new();
    let fallback_language = raw
        .fallback_language
        .clone()
        .map(|l| {
            let at = l.span().start;
            let l = l.into_inner();
            if !is_iso_639_1(&l) {
                problems.push(TemplatesProblem {
                    line: line_at(at),
                    message: format!(
                        "`fallback_language`: `{l}` is not an ISO 639-1 code like `es`"
                    ),
                });
            }
            l
        })
        .unwrap_or_else(|| "es".to_owned());
    for (purpose, languages) in raw.purposes() {
        for (lang, raw) in languages {
            let at = lang.span().start;
            if !is_iso_639_1(lang.get_ref()) {
                problems.push(TemplatesProblem {
                    line: line_at(at),
                    message: format!(
                        "`{}.{}`: the key is the contact's language, an ISO 639-1 code like `en`",
                        purpose.key(),
                        lang.get_ref()
                    ),
                });
            }
            let name = raw.name.get_ref().trim().to_owned();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                problems.push(TemplatesProblem {
                    line: line_at(raw.name.span().start),
                    message: format!(
                        "template name `{name}`: Meta's names are lowercase letters, digits and `_`"
                    ),
                });
            }
            for (parameter, fallback) in &raw.fallbacks {
                if !raw.parameters.iter().any(|p| p.get_ref() == parameter) {
                    problems.push(TemplatesProblem {
                        line: line_at(fallback.span().start),
                        message: format!(
                            "`{}.{}`: a fallback for `{parameter}`, which is not one of its parameters",
                            purpose.key(),
                            lang.get_ref()
                        ),
                    });
                } else if fallback.get_ref().trim().is_empty() {
                    problems.push(TemplatesProblem {
                        line: line_at(fallback.span().start),
                        message: format!(
                            "`{}.{}`: the fallback for `{parameter}` is empty, and Meta refuses an empty parameter",
                            purpose.key(),
                            lang.get_ref()
                        ),
                    });
                }
            }
            for parameter in &raw.parameters {
                if !purpose.values().contains(&parameter.get_ref().as_str()) {
                    problems.push(TemplatesProblem {
                        line: line_at(parameter.span().start),
                        message: format!(
                            "`{}` gives no value `{}`; it gives {}",
                            purpose.key(),
                            parameter.get_ref(),
                            purpose.values().join(", ")
                        ),
                    });
                }
            }
            entries.insert(
                (purpose, lang.into_inner()),
                TemplateSpec {
                    name,
                    language: raw.language.into_inner().trim().to_owned(),
                    category: raw.category,
                    parameters: raw
                        .parameters
                        .into_iter()
                        .map(Spanned::into_inner)
                        .collect(),
                    fallbacks: raw
                        .fallbacks
                        .into_iter()
                        .map(|(name, text)| (name, text.into_inner()))
                        .collect(),
                    quick_replies: raw.quick_replies,
                },
            );
        }
    }
    for purpose in Purpose::ALL {
        let has = entries.keys().any(|(p, _)| *p == purpose);
        if has && !entries.contains_key(&(purpose, fallback_language.clone())) {
            problems.push(TemplatesProblem {
                line: 1,
                message: format!(
                    "`{}` has no template in the fallback language `{fallback_language}`: a \
                     contact in another language would get none",
                    purpose.key()
                ),
            });
        }
    }
    if !problems.is_empty() {
        problems.sort_by_key(|p| p.line);
        return Err(problems);
    }
    Ok(Templates {
        fallback_language,
        entries,
        from_file: true,
    })
}

fn is_iso_639_1(code: &str) -> bool {
    code.len() == 2 && code.bytes().all(|b| b.is_ascii_lowercase())
}

/// The file as written: a table per purpose, a template per language.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTemplates {
    fallback_language: Option<Spanned<String>>,
    visit_reminder: Option<Languages>,
    listing_alert: Option<Languages>,
    re_engagement: Option<Languages>,
    staff_handoff: Option<Languages>,
    operator_follow_up: Option<Languages>,
    staff_visit: Option<Languages>,
    visit_outcome: Option<Languages>,
    visit_feedback: Option<Languages>,
    offer_received: Option<Languages>,
    offer_answer: Option<Languages>,
    lead_first_contact: Option<Languages>,
}

type Languages = BTreeMap<Spanned<String>, RawTemplate>;

impl RawTemplates {
    fn purposes(self) -> Vec<(Purpose, Languages)> {
        [
            (Purpose::VisitReminder, self.visit_reminder),
            (Purpose::ListingAlert, self.listing_alert),
            (Purpose::ReEngagement, self.re_engagement),
            (Purpose::StaffHandoff, self.staff_handoff),
            (Purpose::OperatorFollowUp, self.operator_follow_up),
            (Purpose::StaffVisit, self.staff_visit),
            (Purpose::VisitOutcome, self.visit_outcome),
            (Purpose::VisitFeedback, self.visit_feedback),
            (Purpose::OfferReceived, self.offer_received),
            (Purpose::OfferAnswer, self.offer_answer),
            (Purpose::LeadFirstContact, self.lead_first_contact),
        ]
        .into_iter()
        .filter_map(|(purpose, languages)| Some((purpose, languages?)))
        .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTemplate {
    name: Spanned<String>,
    language: Spanned<String>,
    category: Category,
    #[serde(default)]
    parameters: Vec<Spanned<String>>,
    /// Parameter → what stands in when the service has no value for it.
    #[serde(default)]
    fallbacks: BTreeMap<String, Spanned<String>>,
    /// The approved template's quick-reply buttons (0 to 3 here).
    #[serde(default)]
    quick_replies: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
fallback_language = "es"

[visit_reminder.es]
name = "visit_reminder"
language = "es"
category = "utility"
parameters = ["property", "when", "address"]

[visit_reminder.en]
name = "visit_reminder_en"
language = "en_US"
category = "utility"
parameters = ["property", "when", "address"]

[re_engagement.es]
name = "seguimos_aqui"
language = "es"
category = "marketing"
parameters = ["name"]
"#;

    #[test]
    fn a_purpose_goes_in_the_contacts_language_else_the_fallback() {
        let templates = parse(FILE).unwrap();
        let english = templates
            .for_purpose(Purpose::VisitReminder, Some("en"))
            .unwrap();
        assert_eq!(
            (english.name.as_str(), english.language.as_str()),
            ("visit_reminder_en", "en_US")
        );
        let portuguese = templates
            .for_purpose(Purpose::VisitReminder, Some("pt"))
            .unwrap();
        assert_eq!(portuguese.name, "visit_reminder");
        assert!(
            templates
                .for_purpose(Purpose::ListingAlert, Some("es"))
                .is_none()
        );
        // The English one paused: the fallback language's.
        let usable = templates
            .usable_for(Purpose::VisitReminder, Some("en"), |spec| {
                spec.language != "en_US"
            })
            .unwrap();
        assert_eq!(usable.name, "visit_reminder");
        let values = [
            ("when", "mañana\n a las  10:00".into()),
            ("property", "Ático".into()),
        ];
        // No address and no fallback for it: not sent at all, rather than refused by Meta.
        assert_eq!(english.fill(&values), Err("address".to_owned()));
        let mut with_fallback = english.clone();
        with_fallback
            .fallbacks
            .insert("address".into(), "the address we sent you".into());
        assert_eq!(
            with_fallback.fill(&values),
            Ok(vec![
                "Ático".to_owned(),
                "mañana a las 10:00".to_owned(),
                "the address we sent you".to_owned()
            ])
        );
        // An empty value is as good as none.
        let empty = [("address", " ".into()), ("property", "Ático".into())];
        assert!(matches!(with_fallback.fill(&empty), Err(name) if name == "when"));
    }

    #[test]
    fn a_broken_file_is_refused_with_the_line_of_each_problem() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "[visit_remindr.es]\nname = \"a\"\nlanguage = \"es\"\ncategory = \"utility\"\n",
                1,
                "unknown field `visit_remindr`",
            ),
            (
                "[visit_reminder.es]\nname = \"a\"\nlanguage = \"es\"\ncategory = \"promo\"\n",
                4,
                "unknown variant",
            ),
            (
                "[visit_reminder.es]\nname = \"a\"\nlanguage = \"es\"\ncategory = \"utility\"\nparameters = [\"propiedad\"]\n",
                5,
                "no value `propiedad`",
            ),
            (
                "[visit_reminder.es]\nname = \"Visit Reminder\"\nlanguage = \"es\"\ncategory = \"utility\"\n",
                2,
                "lowercase",
            ),
            (
                "[visit_reminder.en]\nname = \"a\"\nlanguage = \"en\"\ncategory = \"utility\"\n",
                1,
                "fallback language",
            ),
            (
                "[visit_reminder.es]\nname = \"a\"\nlanguage = \"es\"\ncategory = \"utility\"\ncolour = 1\n",
                5,
                "unknown field",
            ),
            (
                "[visit_reminder.es]\nname = \"a\"\nlanguage = \"es\"\ncategory = \"utility\"\nparameters = [\"property\"]\nfallbacks = { address = \"x\" }\n",
                6,
                "not one of its parameters",
            ),
            (
                "[visit_reminder.es]\nname = \"a\"\nlanguage = \"es\"\ncategory = \"utility\"\nparameters = [\"property\"]\nfallbacks = { property = \" \" }\n",
                6,
                "is empty",
            ),
        ];
        for (text, line, message) in cases {
            let problems = parse(text).expect_err(text);
            assert!(
                problems
                    .iter()
                    .any(|p| p.line == *line && p.message.contains(message)),
                "{text:?}: {problems:?}"
            );
        }
    }
}
