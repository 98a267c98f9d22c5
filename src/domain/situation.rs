//! What is going on with a contact, as the agency's data says: what the fast path's router
//! reads beside their words. «Is my viewing confirmed?» is about an appointment to come; «¿qué
//! tal fue?» about a visit made; from a contact with neither, the words alone are not enough.

use std::fmt;

/// The contact's visits, as the data says at the turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Situation {
    /// A booked appointment still to come.
    pub upcoming_appointment: bool,
    /// A visit already made (an appointment past, a visit recorded).
    pub past_visit: bool,
}

/// What an assistant needs of the contact's situation before the fast path sends a message to
/// it (`fast_path_needs` in its prompt file); the model may still delegate without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SituationNeed {
    UpcomingAppointment,
    PastVisit,
}

impl SituationNeed {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "upcoming_appointment" => Some(Self::UpcomingAppointment),
            "past_visit" => Some(Self::PastVisit),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::UpcomingAppointment => "upcoming_appointment",
            Self::PastVisit => "past_visit",
        }
    }

    /// Whether `situation` has what this need asks for.
    pub fn met_by(self, situation: Situation) -> bool {
        match self {
            Self::UpcomingAppointment => situation.upcoming_appointment,
            Self::PastVisit => situation.past_visit,
        }
    }
}

impl Situation {
    /// A labelled line's situation: `none`, `upcoming_appointment` or `past_visit`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(Self::default()),
            other => SituationNeed::parse(other).map(|need| Self {
                upcoming_appointment: need == SituationNeed::UpcomingAppointment,
                past_visit: need == SituationNeed::PastVisit,
            }),
        }
    }
}

impl fmt::Display for SituationNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
