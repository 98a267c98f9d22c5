//! Words the customer reads that more than one layer writes: one home for them, so the engine,
//! the guard and the tools say the same thing the same way.

/// The day of the week as a Spanish agency says it.
pub fn weekday_es(day: chrono::Weekday) -> &'static str {
    const DAYS: [&str; 7] = [
        "lunes",
        "martes",
        "miércoles",
        "jueves",
        "viernes",
        "sábado",
        "domingo",
    ];
    DAYS[day.num_days_from_monday() as usize]
}
