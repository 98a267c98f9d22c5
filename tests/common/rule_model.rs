//! A stand-in for a real model, speaking OpenAI's Chat Completions: rules over the system
//! prompt (which assistant asks), the tools offered and the conversation so far, in Spanish,
//! English and Portuguese. The shipped conversation tests' cassettes are recorded against it
//! (`scripts/record-conversations`), since no provider is reachable where they are written;
//! with a key, `zaguan test --record` records the real model instead. It is a fake LLM, the one
//! kind of server the suites fake.

use serde_json::{Value, json};

/// The language a customer writes in, by its common words.
pub fn lang_of(text: &str) -> &'static str {
    let lower = format!(" {} ", fold(text));
    let words = |list: &[&str]| list.iter().filter(|w| lower.contains(*w)).count();
    let en = words(&[
        " the ",
        " i ",
        " i'd ",
        " want ",
        " please",
        " can ",
        " my ",
        " to ",
        " is ",
        " hello",
        " hi ",
        " thanks",
        " yes",
        " book ",
        " visit ",
        " what ",
        " show ",
        " looking ",
        " with ",
    ]);
    let pt = words(&[
        " quero ",
        " voce",
        " obrigad",
        " ola",
        " um ",
        " uma ",
        " nao ",
        " meu ",
        " minha ",
        " gostaria",
        " apartamento",
        " imovel",
        " fotos do",
        " sim",
        " marcar",
        " procuro ",
        " com ",
        " pode ",
    ]);
    let es = words(&[
        " quiero ", " hola", " gracias", " el ", " la ", " un ", " una ", " mi ", " por ", " de ",
        " que ", " busco ", " piso ", " si ", " puedo ", " me ",
    ]);
    if en > es && en >= pt && en > 0 {
        "en"
    } else if pt > es && pt > 0 {
        "pt"
    } else {
        "es"
    }
}

fn fold(text: &str) -> String {
    text.to_lowercase()
        .replace(['á', 'à', 'â', 'ã'], "a")
        .replace(['é', 'ê'], "e")
        .replace('í', "i")
        .replace(['ó', 'ô', 'õ'], "o")
        .replace('ú', "u")
        .replace('ç', "c")
        .replace('ñ', "n")
}

fn t(lang: &str, es: &str, en: &str, pt: &str) -> String {
    match lang {
        "en" => en,
        "pt" => pt,
        _ => es,
    }
    .to_owned()
}

fn has(text: &str, words: &[&str]) -> bool {
    let text = fold(text);
    words.iter().any(|w| text.contains(w))
}

/// The first `P-1234` in `text`.
fn property_id(text: &str) -> Option<String> {
    let start = text.find("P-")?;
    let id: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (id.len() > 2).then_some(id)
}

/// The listing of an appointment id (`A-P1001-…` → `P-1001`).
fn appointment_property(text: &str) -> Option<String> {
    let id = id_with(text, "A-P")?;
    let digits: String = id[3..].chars().take_while(char::is_ascii_digit).collect();
    Some(format!("P-{digits}"))
}

/// The first id with `prefix` (`A-`, `V-`, `S-`) in `text`.
pub fn id_with(text: &str, prefix: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ':' | '·'))
        .find(|w| w.starts_with(prefix) && w.len() > prefix.len())
        .map(|w| w.trim_end_matches('.').to_owned())
}

/// An amount in euros: «300.000», «250000 €», «1.200», «300k».
pub fn amount(text: &str) -> Option<u64> {
    let folded = fold(text);
    let mut best = None;
    for word in folded.split(|c: char| c.is_whitespace() || c == '€') {
        let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let (digits, thousand) = match word.strip_suffix('k') {
            Some(d) => (d, 1000),
            None => (word, 1),
        };
        let digits: String = digits.chars().filter(|c| *c != '.').collect();
        if let Ok(n) = digits.parse::<u64>()
            && n * thousand >= 300
        {
            best = Some(n * thousand);
            break;
        }
    }
    best
}

const CITIES: [&str; 4] = ["Madrid", "Valencia", "Sevilla", "Málaga"];

fn city(text: &str) -> Option<&'static str> {
    let folded = fold(text);
    CITIES
        .into_iter()
        .find(|c| folded.contains(&fold(c)))
        .or_else(|| folded.contains("seville").then_some("Sevilla"))
}

pub fn bedrooms(text: &str) -> Option<u64> {
    let folded = fold(text);
    let words: Vec<&str> = folded.split_whitespace().collect();
    words.windows(2).find_map(|pair| {
        let n = pair[0].parse::<u64>().ok()?;
        has(pair[1], &["hab", "dormitor", "bedroom", "quarto", "cuarto"]).then_some(n)
    })
}

/// The weekday a customer names, as the tools write it (Spanish).
pub fn weekday(text: &str) -> Option<&'static str> {
    let folded = fold(text);
    [
        (["lunes", "monday", "segunda"], "lunes"),
        (["martes", "tuesday", "terca"], "martes"),
        (["miercoles", "wednesday", "quarta"], "miércoles"),
        (["jueves", "thursday", "quinta"], "jueves"),
        (["viernes", "friday", "sexta"], "viernes"),
        (["sabado", "saturday", "sabado"], "sábado"),
    ]
    .into_iter()
    .find(|(names, _)| names.iter().any(|n| folded.contains(n)))
    .map(|(_, day)| day)
}

fn call(messages: usize, name: &str, args: Value) -> Value {
    json!({"role": "assistant", "content": null, "refusal": null,
        "tool_calls": [{"id": format!("call_r{messages}"), "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
}

fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text, "refusal": null})
}

/// The conversation as the rules read it.
struct Chat<'a> {
    messages: &'a [Value],
    tools: Vec<&'a str>,
}

impl<'a> Chat<'a> {
    fn last(&self) -> &'a Value {
        self.messages.last().unwrap()
    }

    fn role(&self) -> &'a str {
        self.last()["role"].as_str().unwrap_or_default()
    }

    fn content(&self) -> &'a str {
        self.last()["content"].as_str().unwrap_or_default()
    }

    /// The last thing the customer said.
    fn user(&self) -> &'a str {
        self.messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
    }

    /// Everything the customer said, newest first.
    fn users(&self) -> impl Iterator<Item = &'a str> {
        self.messages
            .iter()
            .rev()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
    }

    /// The tool whose result is the last message.
    fn answered_tool(&self) -> Option<&'a str> {
        let id = self.last()["tool_call_id"].as_str()?;
        self.messages.iter().rev().find_map(|m| {
            m["tool_calls"].as_array()?.iter().find_map(|c| {
                (c["id"] == id).then(|| c["function"]["name"].as_str().unwrap_or_default())
            })
        })
    }

    /// The newest `P-…` anywhere in the conversation.
    fn property(&self) -> Option<String> {
        self.messages.iter().rev().find_map(|m| {
            m["content"].as_str().and_then(property_id).or_else(|| {
                m["tool_calls"]
                    .as_array()?
                    .iter()
                    .find_map(|c| property_id(c["function"]["arguments"].as_str()?))
            })
        })
    }

    fn offers(&self, tool: &str) -> bool {
        self.tools.contains(&tool)
    }

    fn lang(&self) -> &'static str {
        self.users()
            .find(|u| !u.trim().is_empty() && !u.starts_with('('))
            .map_or("es", lang_of)
    }

    fn call(&self, name: &str, args: Value) -> Value {
        call(self.messages.len(), name, args)
    }
}

/// The answer to one Chat Completions request: an assistant message.
pub fn answer(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    // Which assistant asks: the first line of its prompt says (the primary's body names the
    // others too).
    let system = messages[0]["content"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default();
    let tools = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let chat = Chat { messages, tools };
    let lang = chat.lang();
    if system.starts_with("Eres el revisor final") {
        // guard_translator: the rules already answer in the customer's language.
        return say(chat.user());
    }
    if chat.role() == "tool"
        && chat
            .content()
            .starts_with("Waiting for the user's confirmation")
    {
        return say(&t(
            lang,
            "Te lo dejo preparado: confírmalo con el botón.",
            "All set: confirm it with the button.",
            "Está preparado: confirme com o botão.",
        ));
    }
    if chat.role() == "tool" && chat.content().starts_with("Error") {
        return say(&format!(
            "{} {}",
            t(
                lang,
                "No he podido hacerlo:",
                "I couldn't do it:",
                "Não consegui:"
            ),
            chat.content().trim_start_matches("Error: ")
        ));
    }
    if chat.role() == "tool"
        && chat.content().starts_with("Not executed")
        && !(system.contains("especialista en citas") && weekday(chat.user()).is_some())
    {
        return say(&t(
            lang,
            "De acuerdo, no lo hago. ¿Qué prefieres?",
            "Fine, I won't. What would you prefer?",
            "Certo, não faço. O que prefere?",
        ));
    }
    let delegated = chat.role() == "tool"
        && chat
            .content()
            .starts_with("The conversation is now handled");
    let from_user = chat.role() == "user" || delegated;
    if system.contains("especialista en búsqueda") {
        searcher(&chat, lang, from_user)
    } else if system.contains("especialista en propiedades") {
        property(&chat, lang, from_user)
    } else if system.contains("especialista en citas") {
        appointments(&chat, lang, from_user)
    } else if system.contains("especialista en financiación") {
        mortgage(&chat, lang, from_user)
    } else if system.contains("especialista en ofertas") {
        offers(&chat, lang, from_user)
    } else if system.contains("especialista en propietarios") {
        owners(&chat, lang, from_user)
    } else if system.contains("seguimiento de visitas") {
        visits(&chat, lang, from_user)
    } else {
        primary(&chat, lang)
    }
}

/// Another assistant's business, seen from a subgraph: hand the conversation back.
fn elsewhere(chat: &Chat<'_>, mine: &[&str]) -> Option<Value> {
    let user = chat.user();
    let domains: [(&str, &[&str]); 5] = [
        (
            "hipoteca",
            &["hipoteca", "mortgage", "financiamento", "financiacion"],
        ),
        ("oferta", &["oferta", "offer", "proposta"]),
        ("cita", &["cita", "visita", "visit", "marcar", "agendar"]),
        (
            "busqueda",
            &["busco", "looking for", "procuro", "avisame", "alert"],
        ),
        ("persona", &["persona", "humano", "person"]),
    ];
    let other = domains
        .iter()
        .find(|(name, words)| !mine.contains(name) && has(user, words))?;
    Some(chat.call(
        "CompleteOrEscalate",
        json!({"cancel": true, "reason": format!("el cliente pregunta por {}", other.0)}),
    ))
}

fn primary(chat: &Chat<'_>, lang: &str) -> Value {
    let back = chat
        .content()
        .starts_with("Back with the primary assistant");
    if chat.role() == "tool" && !back {
        return match chat.answered_tool() {
            Some("business_info") => {
                let hours: Vec<&str> = chat
                    .content()
                    .lines()
                    .filter(|l| l.starts_with("- "))
                    .take(3)
                    .collect();
                say(&format!(
                    "{}\n{}",
                    t(
                        lang,
                        "Nuestro horario:",
                        "Our opening hours:",
                        "O nosso horário:"
                    ),
                    hours.join("\n")
                ))
            }
            Some("request_human") => say(&t(
                lang,
                "He avisado a una persona del equipo; te escribirá por aquí.",
                "I've told a person on the team; they'll write to you here.",
                "Avisei uma pessoa da equipa; vai escrever-lhe por aqui.",
            )),
            _ => say(&t(
                lang,
                "¿En qué más puedo ayudarte?",
                "How else can I help?",
                "Em que mais posso ajudar?",
            )),
        };
    }
    let user = chat.user();
    let route = |tool: &str| {
        chat.offers(tool)
            .then(|| chat.call(tool, json!({"query": user})))
    };
    let intents: [(&[&str], &str); 8] = [
        (
            &[
                "me gusto",
                "la visita fue",
                "visit went",
                "gostei",
                "after the visit",
                "despues de la visita",
                "opinion",
            ],
            "ToVisitTrackerAssistant",
        ),
        (
            &[
                "hipoteca",
                "mortgage",
                "financiamento",
                "cuota",
                "financiacion",
            ],
            "ToMortgageLoanAssistant",
        ),
        (
            &["oferta", "offer", "proposta", "ofrecer"],
            "ToProspectOfferAssistant",
        ),
        (
            &[
                "mis anuncios",
                "mi piso",
                "mis pisos",
                "my listing",
                "meu imovel",
                "bajar el precio",
                "estadisticas",
                "cuantas visitas",
            ],
            "ToOwnerInfoAssistant",
        ),
        (
            &[
                "cita",
                "visita",
                "visit",
                "marcar",
                "agendar",
                "ver el piso",
                "cancela",
                "cambiar la",
            ],
            "ToAppointmentAssistant",
        ),
        (
            &[
                "fotos",
                "photos",
                "foto",
                "detalles",
                "details",
                "garaje",
                "ascensor",
                "cuanto cuesta",
                "how much",
                "quanto custa",
            ],
            "ToPropertyAssistant",
        ),
        (
            &[
                "busco",
                "looking for",
                "procuro",
                "alquilar",
                "rent",
                "comprar",
                "buy",
                "avisame",
                "avise",
                "let me know",
                "tienes pisos",
                "teneis",
            ],
            "ToSearcherAssistant",
        ),
        (&["p-1", "p-2", "p-3"], "ToPropertyAssistant"),
    ];
    if has(
        user,
        &[
            "hablar con alguien",
            "alguien del equipo",
            "talk to someone",
            "falar com alguem",
        ],
    ) && chat.offers("request_human")
    {
        return chat.call(
            "request_human",
            json!({"reason": format!("Pide hablar con alguien: «{user}»")}),
        );
    }
    if has(
        user,
        &[
            "horario",
            "abris",
            "abren",
            "open",
            "hours",
            "horas abre",
            "abrem",
        ],
    ) && chat.offers("business_info")
    {
        return chat.call("business_info", json!({"topic": "hours"}));
    }
    for (words, tool) in intents {
        if has(user, words)
            && let Some(call) = route(tool)
        {
            return call;
        }
    }
    say(&t(
        lang,
        "¡Hola! Soy el asistente de la agencia. ¿Buscas vivienda, quieres ver un piso o tienes uno que vender?",
        "Hi! I'm the agency's assistant. Are you looking for a home, want to see a flat, or have one to sell?",
        "Olá! Sou o assistente da agência. Procura casa, quer ver um apartamento ou tem um para vender?",
    ))
}

fn searcher(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    if from_user {
        if chat.role() == "user"
            && let Some(back) = elsewhere(chat, &["busqueda"])
        {
            return back;
        }
        let user = chat.user();
        let mut criteria = json!({});
        if let Some(city) = city(user) {
            criteria["city"] = json!(city);
        }
        if has(user, &["alquil", "rent", "alug"]) {
            criteria["operation"] = json!("rent");
        } else if has(user, &["compr", "buy", "venta"]) {
            criteria["operation"] = json!("sale");
        }
        if let Some(max) = amount(user) {
            criteria["max_price"] = json!(max);
        }
        if let Some(rooms) = bedrooms(user) {
            criteria["min_bedrooms"] = json!(rooms);
        }
        if has(user, &["terraza", "terrace", "terraco"]) {
            criteria["amenities"] = json!(["terraza"]);
        }
        if has(
            user,
            &["avisame", "avisadme", "let me know", "alert", "avise"],
        ) {
            if criteria.get("city").is_none() {
                criteria["city"] = json!("Madrid");
            }
            criteria.as_object_mut().unwrap().remove("amenities");
            return chat.call("create_search_alert", criteria);
        }
        return chat.call("search_properties", criteria);
    }
    match chat.answered_tool() {
        Some("search_properties") => {
            let ids: Vec<String> = chat
                .content()
                .lines()
                .filter_map(property_id)
                .take(3)
                .collect();
            if ids.is_empty() {
                say(&t(
                    lang,
                    "No he encontrado nada con esos criterios. ¿Probamos con otra zona o precio?",
                    "I found nothing with those criteria. Shall we try another area or price?",
                    "Não encontrei nada com esses critérios. Tentamos outra zona ou preço?",
                ))
            } else {
                say(&format!(
                    "{} {}",
                    t(
                        lang,
                        "Tengo estas opciones:",
                        "I have these options:",
                        "Tenho estas opções:"
                    ),
                    ids.join(", ")
                ))
            }
        }
        Some("create_search_alert") => say(&t(
            lang,
            "Hecho: te avisaré cuando entre algo que encaje.",
            "Done: I'll let you know when something matching comes in.",
            "Feito: aviso quando entrar algo que encaixe.",
        )),
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

fn property(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    if from_user {
        if chat.role() == "user"
            && let Some(back) = elsewhere(chat, &[])
        {
            return back;
        }
        let Some(id) = property_id(chat.user()).or_else(|| chat.property()) else {
            return say(&t(
                lang,
                "¿De qué propiedad me hablas? Dime su referencia (P-…).",
                "Which property? Tell me its reference (P-…).",
                "De que imóvel fala? Diga a referência (P-…).",
            ));
        };
        if has(chat.user(), &["foto", "photo", "imagen", "picture"]) {
            return chat.call(
                "send_property_photos",
                json!({"property_id": id, "count": 2}),
            );
        }
        return chat.call("get_property_details", json!({"property_id": id}));
    }
    match chat.answered_tool() {
        Some("send_property_photos") => say(&t(
            lang,
            "Ahí van las fotos.",
            "Here are the photos.",
            "Aqui estão as fotos.",
        )),
        Some("get_property_details") => {
            let first = chat.content().lines().next().unwrap_or_default();
            say(&format!(
                "{} {first}",
                t(lang, "Te cuento:", "Here it is:", "Aqui está:")
            ))
        }
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

fn appointments(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    let user = chat.user();
    let cancel = has(user, &["cancel", "anula", "anular", "desmarcar"]);
    let reschedule = has(
        user,
        &[
            "cambia",
            "mover",
            "reschedule",
            "move",
            "remarcar",
            "otro dia",
            "pasar al",
        ],
    );
    if from_user {
        if chat.role() == "user"
            && let Some(back) = elsewhere(chat, &["cita"])
        {
            return back;
        }
        if cancel || reschedule {
            return chat.call("list_my_appointments", json!({}));
        }
        let Some(id) = property_id(user).or_else(|| chat.property()) else {
            return say(&t(
                lang,
                "¿Qué piso quieres visitar? Dime su referencia (P-…).",
                "Which flat would you like to visit? Tell me its reference (P-…).",
                "Que imóvel quer visitar? Diga a referência (P-…).",
            ));
        };
        return chat.call("list_available_slots", json!({"property_id": id}));
    }
    let pick = |content: &str| {
        let lines: Vec<&str> = content.lines().filter(|l| l.contains("S-")).collect();
        let line = weekday(user)
            .and_then(|day| lines.iter().find(|l| l.contains(day)))
            .or(lines.first())?;
        id_with(line, "S-")
    };
    if chat.content().starts_with("Not executed") {
        let listing = chat
            .messages
            .iter()
            .rev()
            .filter_map(|m| m["content"].as_str())
            .find(|c| c.starts_with("Huecos libres"))
            .unwrap_or_default();
        return match pick(listing) {
            Some(slot) => chat.call("book_appointment", json!({"slot_id": slot})),
            None => say(&t(
                lang,
                "Ese día no hay huecos. ¿Otro día?",
                "No slots that day. Another day?",
                "Não há horários nesse dia. Outro dia?",
            )),
        };
    }
    match chat.answered_tool() {
        Some("list_my_appointments") => {
            let Some(appointment) = id_with(chat.content(), "A-") else {
                return say(&t(
                    lang,
                    "No tienes ninguna visita reservada.",
                    "You have no visit booked.",
                    "Não tem nenhuma visita marcada.",
                ));
            };
            if cancel {
                chat.call("cancel_appointment", json!({"appointment_id": appointment}))
            } else {
                let property = property_id(chat.content())
                    .or_else(|| appointment_property(chat.content()))
                    .unwrap_or_default();
                chat.call("list_available_slots", json!({"property_id": property}))
            }
        }
        Some("list_available_slots") => {
            let Some(slot) = pick(chat.content()) else {
                return say(&t(
                    lang,
                    "No quedan huecos esta semana. ¿Miramos la siguiente?",
                    "No slots left this week. Shall we look at next week?",
                    "Não há horários esta semana. Vemos a próxima?",
                ));
            };
            let appointment = chat
                .messages
                .iter()
                .rev()
                .filter(|m| m["role"] == "tool")
                .find_map(|m| id_with(m["content"].as_str()?, "A-"));
            match appointment.filter(|_| reschedule) {
                Some(appointment) => chat.call(
                    "reschedule_appointment",
                    json!({"appointment_id": appointment, "slot_id": slot}),
                ),
                None => chat.call("book_appointment", json!({"slot_id": slot})),
            }
        }
        Some("book_appointment") | Some("reschedule_appointment") => {
            let id = id_with(chat.content(), "A-").unwrap_or_default();
            say(&format!(
                "{} ({id})",
                t(
                    lang,
                    "¡Visita reservada!",
                    "Visit booked!",
                    "Visita marcada!"
                )
            ))
        }
        Some("cancel_appointment") => say(&t(
            lang,
            "Visita cancelada.",
            "Visit cancelled.",
            "Visita cancelada.",
        )),
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

fn mortgage(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    if from_user {
        if chat.role() == "user"
            && let Some(back) = elsewhere(chat, &["hipoteca"])
        {
            return back;
        }
        let user = chat.user();
        if has(user, &["llam", "call me", "ligue"]) {
            return chat.call(
                "request_callback",
                json!({"reason": "Estudio de hipoteca", "preferred_time": "por la tarde"}),
            );
        }
        let mut args = json!({"years": 30});
        match property_id(user).or_else(|| chat.property()) {
            Some(id) if amount(user).is_none() => args["property_id"] = json!(id),
            _ => args["price"] = json!(amount(user).unwrap_or(250_000)),
        }
        return chat.call("simulate_mortgage", args);
    }
    match chat.answered_tool() {
        Some("simulate_mortgage") => {
            let line = chat
                .content()
                .lines()
                .find(|l| l.contains("€"))
                .unwrap_or_default();
            say(&format!(
                "{} {line}",
                t(
                    lang,
                    "Según la simulación:",
                    "From the simulation:",
                    "Segundo a simulação:"
                )
            ))
        }
        Some("request_callback") => say(&t(
            lang,
            "Hecho: un asesor te llamará.",
            "Done: an adviser will call you.",
            "Feito: um consultor vai ligar-lhe.",
        )),
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

fn offers(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    if from_user {
        if chat.role() == "user"
            && let Some(back) = elsewhere(chat, &["oferta"])
        {
            return back;
        }
        let user = chat.user();
        if has(user, &["mis ofertas", "my offers", "minhas propostas"]) {
            return chat.call("list_my_offers", json!({}));
        }
        let (Some(id), Some(amount)) =
            (property_id(user).or_else(|| chat.property()), amount(user))
        else {
            return say(&t(
                lang,
                "¿Por qué piso y qué importe quieres ofrecer?",
                "For which flat, and how much would you offer?",
                "Para que imóvel e que valor quer oferecer?",
            ));
        };
        return chat.call("submit_offer", json!({"property_id": id, "amount": amount}));
    }
    match chat.answered_tool() {
        Some("submit_offer") => say(&t(
            lang,
            "Oferta registrada; el propietario la estudiará.",
            "Offer recorded; the owner will consider it.",
            "Proposta registada; o proprietário vai analisá-la.",
        )),
        Some("list_my_offers") => say(chat.content().lines().next().unwrap_or_default()),
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

fn owners(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    if from_user {
        let user = chat.user();
        if has(
            user,
            &[
                "bajar el precio",
                "lower the price",
                "baixar o preco",
                "cambiar el precio",
            ],
        ) {
            let id = property_id(user)
                .or_else(|| chat.property())
                .unwrap_or_default();
            return chat.call(
                "request_listing_change",
                json!({"property_id": id, "change": "price", "new_price": amount(user).unwrap_or(200_000)}),
            );
        }
        return chat.call("owner_listing_stats", json!({}));
    }
    match chat.answered_tool() {
        Some("owner_listing_stats") => {
            let ids: Vec<String> = chat.content().lines().filter_map(property_id).collect();
            say(&format!(
                "{} {}",
                t(lang, "Tus inmuebles:", "Your listings:", "Os seus imóveis:"),
                ids.join(", ")
            ))
        }
        Some("request_listing_change") => say(&t(
            lang,
            "Anotado: tu agente revisará el cambio de precio.",
            "Noted: your agent will review the price change.",
            "Anotado: o seu agente vai rever a mudança de preço.",
        )),
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

fn visits(chat: &Chat<'_>, lang: &str, from_user: bool) -> Value {
    if from_user {
        if has(
            chat.user(),
            &[
                "mi piso",
                "mi inmueble",
                "my listing",
                "meu imovel",
                "mis pisos",
            ],
        ) && chat.offers("owner_listing_stats")
        {
            return chat.call("owner_listing_stats", json!({}));
        }
        return chat.call("list_my_visits", json!({}));
    }
    match chat.answered_tool() {
        Some("list_my_visits") => {
            let Some(visit) = id_with(chat.content(), "V-") else {
                return say(&t(
                    lang,
                    "No veo ninguna visita hecha.",
                    "I see no visit made.",
                    "Não vejo nenhuma visita feita.",
                ));
            };
            let user = chat.user();
            let liked = !has(
                user,
                &[
                    "no me gusto",
                    "didn't like",
                    "nao gostei",
                    "pequeno",
                    "oscuro",
                ],
            );
            chat.call(
                "record_visit_feedback",
                json!({"visit_id": visit,
                       "outcome": if liked { "interested" } else { "not_interested" },
                       "feedback": user,
                       "rating": if liked { 4 } else { 2 }}),
            )
        }
        Some("owner_listing_stats") => {
            let ids: Vec<String> = chat.content().lines().filter_map(property_id).collect();
            say(&format!(
                "{} {}",
                t(lang, "Tus inmuebles:", "Your listings:", "Os seus imóveis:"),
                ids.join(", ")
            ))
        }
        Some("record_visit_feedback") => say(&t(
            lang,
            "Gracias, he guardado tu opinión.",
            "Thanks, I've saved your feedback.",
            "Obrigado, guardei a sua opinião.",
        )),
        _ => say(&t(
            lang,
            "¿Algo más?",
            "Anything else?",
            "Mais alguma coisa?",
        )),
    }
}

/// A whole Chat Completions answer around [`answer`].
pub fn completion(body: &Value) -> Value {
    json!({
        "id": "chatcmpl-rules", "object": "chat.completion", "created": 1,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message": answer(body)}],
        "usage": {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220}
    })
}

/// Serves the rules on a loopback port; the base URL for `OPENAI_BASE_URL` (`…/v1`).
pub async fn serve() -> String {
    async fn handle(axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
        axum::Json(completion(&body))
    }
    let base = super::serve_local(
        axum::Router::new().route("/v1/chat/completions", axum::routing::post(handle)),
    )
    .await;
    format!("{base}/v1")
}
