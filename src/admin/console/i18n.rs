//! The console in the operator's language, with the agency's clock.
//!
//! A Spanish agency's team reads Spanish: every page, label and notice is written once in English
//! (the key) and looked up in the Spanish catalog ([`SPANISH`]). Each operator chooses with the
//! header's language links (a cookie, [`COOKIE`]); until then the browser's `Accept-Language`
//! decides, and English is the default. Instants are shown in the agency's time zone
//! (`ZAGUAN_TIMEZONE`), said once in the footer.
//!
//! The locale of a request is set by [`locale`], a middleware over every console route, for the
//! whole handler: templates ([`t`]), notices ([`tr`]), error pages and dates all read it without
//! it being passed along. What the shared operations answer (a field that does not validate, a
//! conflict) stays in English: the CLI and the API say the same words.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::OnceLock;

use axum::extract::{Path, Query, Request, State};
use axum::http::header::{ACCEPT_LANGUAGE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use minijinja::value::{Kwargs, Value};

use crate::state::AppState;

/// The cookie that keeps an operator's choice of language.
pub const COOKIE: &str = "zaguan_console_lang";

/// The console's languages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    Es,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Es => "es",
        }
    }

    /// `es`, `es-ES`, `ES`… are Spanish; `en`, `en-GB`… English; anything else is none of ours.
    pub fn parse(tag: &str) -> Option<Lang> {
        let primary = tag.trim().split(['-', '_']).next()?.to_ascii_lowercase();
        match primary.as_str() {
            "es" => Some(Lang::Es),
            "en" => Some(Lang::En),
            _ => None,
        }
    }
}

/// The operator's language: the cookie of their choice, else the first of the browser's
/// languages (by `q`) that the console speaks, else English.
pub fn chosen(headers: &HeaderMap) -> Lang {
    super::session::cookie(headers, COOKIE)
        .and_then(|value| Lang::parse(&value))
        .or_else(|| {
            headers
                .get(ACCEPT_LANGUAGE)
                .and_then(|v| v.to_str().ok())
                .and_then(browser_language)
        })
        .unwrap_or(Lang::En)
}

/// The most preferred of `Accept-Language`'s languages that the console speaks (`q=0` is "not
/// this one"; equal weights keep the browser's order).
fn browser_language(header: &str) -> Option<Lang> {
    let mut best: Option<(f32, Lang)> = None;
    for item in header.split(',') {
        let mut parts = item.split(';');
        let Some(lang) = parts.next().and_then(Lang::parse) else {
            continue;
        };
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1.0), |q| q.trim().parse::<f32>().ok())
            .unwrap_or(0.0);
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, lang));
        }
    }
    best.map(|(_, lang)| lang)
}

/// A request's language and the agency's time zone.
#[derive(Clone, Copy, Debug)]
pub struct Locale {
    pub lang: Lang,
    pub tz: Tz,
}

tokio::task_local! {
    static LOCALE: Locale;
    /// The path and query of a page read with GET, for its language links.
    static HERE: Option<String>;
}

/// The locale of the request being answered (English and UTC outside one: a unit test).
pub fn current() -> Locale {
    LOCALE.try_with(|l| *l).unwrap_or(Locale {
        lang: Lang::En,
        tz: chrono_tz::UTC,
    })
}

/// Runs `f` in `locale`: for tests that render a page in a language.
#[cfg(test)]
pub fn with<T>(locale: Locale, f: impl FnOnce() -> T) -> T {
    LOCALE.sync_scope(locale, f)
}

/// The middleware that sets each console request's locale for its whole handler.
pub async fn locale(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let locale = Locale {
        lang: chosen(request.headers()),
        tz: state
            .config
            .as_ref()
            .map_or(chrono_tz::UTC, |c| c.engine.timezone),
    };
    let here = (request.method() == axum::http::Method::GET).then(|| {
        request
            .uri()
            .path_and_query()
            .map_or_else(|| "/console".to_owned(), ToString::to_string)
    });
    LOCALE
        .scope(locale, HERE.scope(here, next.run(request)))
        .await
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct ChooseQuery {
    #[serde(default)]
    back: String,
}

/// `GET /console/language/{es|en}?back=PATH`: keeps the choice for a year and goes back to the
/// page the link was on (a console path of this site, never an address elsewhere).
pub async fn choose(
    State(state): State<AppState>,
    Path(code): Path<String>,
    Query(query): Query<ChooseQuery>,
) -> Response {
    let Some(lang) = Lang::parse(&code).filter(|l| l.code() == code) else {
        return (StatusCode::NOT_FOUND, "no such language").into_response();
    };
    let back = Some(query.back)
        .filter(|path| {
            path.starts_with("/console")
                && !path.starts_with("/console/language")
                && !path.contains(['\\', '\r', '\n'])
        })
        .unwrap_or_else(|| "/console".to_owned());
    let cookie = format!(
        "{COOKIE}={}; Path=/console; SameSite=Lax; Max-Age=31536000{}",
        lang.code(),
        if state.secure_cookies { "; Secure" } else { "" }
    );
    (
        StatusCode::SEE_OTHER,
        [(LOCATION, back), (SET_COOKIE, cookie)],
    )
        .into_response()
}

/// Where a page's language links come back to: the page itself when it was read (GET), else
/// (a form's answer) its section's page.
pub fn back_to(nav: Option<&str>) -> String {
    HERE.try_with(|here| here.clone())
        .ok()
        .flatten()
        .unwrap_or_else(|| match nav {
            None | Some("overview") => "/console".to_owned(),
            Some(section) => format!("/console/{section}"),
        })
}

fn catalog() -> &'static HashMap<&'static str, &'static str> {
    static CATALOG: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    CATALOG.get_or_init(|| SPANISH.iter().copied().collect())
}

/// `english` in `lang`: the catalog's text, or the English itself when it has none (a value
/// from the data, an operator's name).
pub fn text(lang: Lang, english: &str) -> &str {
    match lang {
        Lang::En => english,
        Lang::Es => catalog().get(english).copied().unwrap_or(english),
    }
}

/// `english` in the request's language, each `{name}` replaced by its value.
pub fn tr(english: &str, args: &[(&str, &(dyn Display + Sync))]) -> String {
    fill(text(current().lang, english), args, |v| v.to_owned())
}

fn fill(
    text: &str,
    args: &[(&str, &(dyn Display + Sync))],
    escape: impl Fn(&str) -> String,
) -> String {
    let mut out = text.to_owned();
    for (name, value) in args {
        out = out.replace(&format!("{{{name}}}"), &escape(&value.to_string()));
    }
    out
}

/// The templates' `t("English {name}", name=value)`: the text in the request's language. The
/// catalog's text is ours and may hold markup (`<code>`); the values are escaped.
pub fn t(english: Value, kwargs: Kwargs) -> Result<Value, minijinja::Error> {
    if english.is_undefined() || english.is_none() {
        return Ok(Value::from(""));
    }
    let english = english.to_string();
    let values: Vec<(String, String)> = kwargs
        .args()
        .map(|name| {
            let value: Value = kwargs.get(name)?;
            let shown = if value.is_none() || value.is_undefined() {
                String::new()
            } else if value.is_safe() {
                // Another `t(…)`: escaped already.
                value.to_string()
            } else {
                super::escape(&value.to_string())
            };
            Ok((name.to_owned(), shown))
        })
        .collect::<Result<_, minijinja::Error>>()?;
    kwargs.assert_all_used()?;
    let args: Vec<(&str, &(dyn Display + Sync))> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v as &(dyn Display + Sync)))
        .collect();
    Ok(Value::from_safe_string(fill(
        text(current().lang, &english),
        &args,
        str::to_owned,
    )))
}

/// An instant in the agency's time zone: `03/12/2026 09:41`.
pub fn at(instant: DateTime<Utc>) -> String {
    instant
        .with_timezone(&current().tz)
        .format("%d/%m/%Y %H:%M")
        .to_string()
}

/// An instant of these days in the agency's time zone: `03/12 09:41`.
pub fn short(instant: DateTime<Utc>) -> String {
    instant
        .with_timezone(&current().tz)
        .format("%d/%m %H:%M")
        .to_string()
}

/// An instant to the second in the agency's time zone: `03/12 09:41:07`.
pub fn exact(instant: DateTime<Utc>) -> String {
    instant
        .with_timezone(&current().tz)
        .format("%d/%m %H:%M:%S")
        .to_string()
}

/// A time of day in the agency's time zone, to the second: `09:41:07`.
pub fn clock(instant: DateTime<Utc>) -> String {
    instant
        .with_timezone(&current().tz)
        .format("%H:%M:%S")
        .to_string()
}

/// An RFC 3339 instant from a JSON document, shown by `how` ([`at`], [`short`]); anything else
/// as it is.
pub fn shown_json(value: &mut serde_json::Value, how: fn(DateTime<Utc>) -> String) {
    if let Some(instant) = value
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    {
        *value = serde_json::Value::String(how(instant.with_timezone(&Utc)));
    }
}

/// English → Spanish, for every text of the console. A template's `t("…")` or a notice's
/// `tr("…")` missing here fails the console's tests.
pub const SPANISH: &[(&str, &str)] = &[
    // The frame.
    ("Zaguan console", "Consola de Zaguan"),
    ("Overview", "Resumen"),
    ("Queue", "Cola"),
    ("Conversations", "Conversaciones"),
    ("Visits", "Visitas"),
    ("Offers", "Ofertas"),
    ("Leads", "Contactos de portales"),
    ("Reports", "Informes"),
    ("Prompts", "Prompts"),
    ("Operators", "Operadores"),
    ("Staff", "Equipo"),
    ("Sign out", "Cerrar sesión"),
    ("Language", "Idioma"),
    ("Times are in {tz}.", "Horas en {tz}."),
    // Roles and states, as the data names them.
    ("viewer", "lector"),
    ("operator", "operador"),
    ("admin", "administrador"),
    ("prospect", "cliente"),
    ("owner", "propietario"),
    ("agent", "agente"),
    ("primary", "principal"),
    ("booked", "reservada"),
    ("done", "realizada"),
    ("no_show", "no se presentó"),
    ("cancelled", "cancelada"),
    ("submitted", "pendiente"),
    ("accepted", "aceptada"),
    ("rejected", "rechazada"),
    ("countered", "contraoferta"),
    ("sent", "enviado"),
    ("delivered", "entregado"),
    ("read", "leído"),
    ("failed", "fallido"),
    ("queued", "en cola"),
    ("sending", "enviando"),
    ("played", "escuchado"),
    ("skipped", "omitido"),
    ("withdrawn", "retirada"),
    ("new", "nuevo"),
    ("contacted", "contactado"),
    ("answered", "respondió"),
    ("unreachable", "sin WhatsApp"),
    ("uncontactable", "sin número"),
    ("unreadable", "ilegible"),
    ("template", "plantilla"),
    ("media", "imagen"),
    ("text", "texto"),
    // Sign-in.
    ("Sign in", "Entrar"),
    ("Name", "Nombre"),
    ("Password", "Contraseña"),
    (
        "Your administrator gives you a name and a password (<code>zaguan operators add</code>). The bootstrap administrator signs in as <code>admin</code> with the admin token.",
        "Tu administrador te da un nombre y una contraseña (<code>zaguan operators add</code>). El administrador inicial entra como <code>admin</code> con el token de administración.",
    ),
    (
        "Too many failed attempts; wait a minute.",
        "Demasiados intentos fallidos; espera un minuto.",
    ),
    (
        "Wrong name or password.",
        "Nombre o contraseña incorrectos.",
    ),
    // Refusals.
    (
        "Refused: this form is stale or not ours; reload the page.",
        "Rechazado: este formulario está caducado o no es nuestro; recarga la página.",
    ),
    (
        "Refused: a {has} cannot do this; it needs an {needs}.",
        "Rechazado: un {has} no puede hacer esto; hace falta un {needs}.",
    ),
    ("Back", "Volver"),
    // Overview.
    (
        "No model has answered any instance since {since} ({spell}): {steps} steps served from the agency's data in the limited mode since, the last at {last}.",
        "Ningún modelo ha respondido en ninguna instancia desde {since} ({spell}): desde entonces, {steps} pasos servidos con los datos de la agencia en modo limitado, el último a las {last}.",
    ),
    ("at least {since}", "al menos {since}"),
    ("over {spell}", "más de {spell}"),
    (
        "Offline since {since} ({spell}): no model answers this instance, so the assistants are served from the agency's data in a limited mode (search, listings, visits, mortgage) and hand the rest to the staff.",
        "Sin modelo desde {since} ({spell}): ningún modelo responde a esta instancia, así que los asistentes se sirven con los datos de la agencia en un modo limitado (búsqueda, inmuebles, visitas, hipoteca) y pasan el resto al equipo.",
    ),
    (
        "stuck in an assistant (idle {idle}+)",
        "atascadas en un asistente (inactivas {idle}+)",
    ),
    ("asking for a person", "piden una persona"),
    ("taken by an operator", "atendidas por un operador"),
    (
        "The last hour (all instances)",
        "La última hora (todas las instancias)",
    ),
    ("Messages answered", "Mensajes respondidos"),
    ("Messages failed", "Mensajes fallidos"),
    (
        "Messages waiting or being answered",
        "Mensajes en espera o respondiéndose",
    ),
    (
        "Not delivered (the last 24 hours)",
        "No entregados (las últimas 24 horas)",
    ),
    ("To", "Para"),
    ("When", "Cuándo"),
    ("What", "Qué"),
    ("Status", "Estado"),
    ("Why", "Por qué"),
    (
        "Nothing: every message went out.",
        "Nada: todos los mensajes salieron.",
    ),
    ("Today (all instances)", "Hoy (todas las instancias)"),
    ("Customers who wrote", "Clientes que escribieron"),
    (
        "Median time to the first answer",
        "Mediana hasta la primera respuesta",
    ),
    ("Median time to a person", "Mediana hasta una persona"),
    (
        "Steps by a model / the fast path / offline mode",
        "Pasos de un modelo / de la vía rápida / del modo sin modelo",
    ),
    ("Replies not delivered", "Respuestas no entregadas"),
    (
        "<a href=\"/console/reports\">More in the reports</a>: the funnel, per day, per assistant, the model's cost. Per-instance figures (latency, breakers) are in <code>/metrics</code>.",
        "<a href=\"/console/reports\">Más en los informes</a>: el embudo, por día, por asistente, el coste del modelo. Las cifras por instancia (latencia, cortacircuitos) están en <code>/metrics</code>.",
    ),
    (
        "Version <code>{version}</code>, loaded {at}.",
        "Versión <code>{version}</code>, cargada el {at}.",
    ),
    ("Last edit refused {at}", "Último cambio rechazado el {at}"),
    ("problems", "problemas"),
    (
        "No engine in this process.",
        "No hay motor en este proceso.",
    ),
    // Conversations.
    ("Assistant", "Asistente"),
    ("any", "cualquiera"),
    ("in an assistant", "en un asistente"),
    ("Idle for", "Inactiva desde hace"),
    ("Handoff", "Derivación"),
    ("requested", "pedida"),
    ("taken", "atendida"),
    ("Role", "Rol"),
    ("Number or name", "Número o nombre"),
    ("Filter", "Filtrar"),
    ("Contact", "Contacto"),
    ("Idle", "Inactiva"),
    ("Waiting for", "Esperando"),
    ("Lang", "Idioma"),
    ("{who} has it", "la tiene {who}"),
    ("a person: {reason}", "una persona: {reason}"),
    ("yes to {action}", "un sí a {action}"),
    ("No conversation matches.", "Ninguna conversación coincide."),
    ("← newer", "← más recientes"),
    ("page {page}", "página {page}"),
    ("older →", "más antiguas →"),
    // One conversation.
    (
        "Assistant: <b id=\"dialog-state\">{state}</b> · language {lang} · role {role} · tokens today {tokens}",
        "Asistente: <b id=\"dialog-state\">{state}</b> · idioma {lang} · rol {role} · tokens hoy {tokens}",
    ),
    (
        "served by <span id=\"lease\">{owner}</span> until {until}",
        "servida por <span id=\"lease\">{owner}</span> hasta {until}",
    ),
    ("(free)", "(libre)"),
    ("{who} has it until {until}", "la tiene {who} hasta {until}"),
    (
        "asked for a person: {reason}",
        "pidió una persona: {reason}",
    ),
    (
        "opted out {at} ({source}): no reminders or alerts",
        "se dio de baja el {at} ({source}): sin recordatorios ni alertas",
    ),
    (
        "stopped marketing in WhatsApp {at}: no marketing templates",
        "dejó de recibir marketing desde WhatsApp el {at}: sin plantillas de marketing",
    ),
    (
        "came from the ad «{headline}»",
        "llegó por el anuncio «{headline}»",
    ),
    (
        "WhatsApp messages Meta billed",
        "Mensajes de WhatsApp que Meta cobró",
    ),
    (
        "<b id=\"whatsapp-billed\">{count}</b> billed messages, <b id=\"whatsapp-usd\">{usd}</b> USD.",
        "<b id=\"whatsapp-billed\">{count}</b> mensajes cobrados, <b id=\"whatsapp-usd\">{usd}</b> USD.",
    ),
    ("Billed messages", "Mensajes cobrados"),
    ("WhatsApp (USD)", "WhatsApp (USD)"),
    ("Model (USD)", "Modelo (USD)"),
    ("Per purpose", "Por motivo"),
    (
        "Nothing billed in the period.",
        "Nada cobrado en el periodo.",
    ),
    (
        "The conversations that cost most",
        "Las conversaciones que más costaron",
    ),
    (
        "No price for {categories}: set <code>ZAGUAN_WHATSAPP_PRICES</code> to see money, not only messages.",
        "Sin precio para {categories}: define <code>ZAGUAN_WHATSAPP_PRICES</code> para ver dinero, no solo mensajes.",
    ),
    (
        "WhatsApp {key}: {why}. Marketing templates wait until it clears; utility messages still go.",
        "WhatsApp {key}: {why}. Las plantillas de marketing esperan hasta que se resuelva; los mensajes de servicio siguen saliendo.",
    ),
    (
        "WhatsApp {key}: quality {quality} · messaging limit {limit} · tier {tier} · last signal {event} ({at})",
        "WhatsApp {key}: calidad {quality} · límite de mensajes {limit} · nivel {tier} · última señal {event} ({at})",
    ),
    (
        "Waiting for the customer's yes: <b>{summary}</b> ({tool}, {at})",
        "Esperando el sí del cliente: <b>{summary}</b> ({tool}, {at})",
    ),
    ("Reset to primary", "Volver al principal"),
    ("Release to the bot", "Devolver al bot"),
    ("Take over", "Atender"),
    ("Forget this user…", "Olvidar a este usuario…"),
    (
        "You read this conversation as a viewer: numbers are masked and nothing can be changed.",
        "Lees esta conversación como lector: los números están ocultos y no se puede cambiar nada.",
    ),
    ("Reply as {operator}", "Responder como {operator}"),
    ("Send on WhatsApp", "Enviar por WhatsApp"),
    (
        "The customer last wrote more than 24 hours ago: WhatsApp delivers no reply now, only an approved template. The follow-up template invites them to write back.",
        "El cliente escribió por última vez hace más de 24 horas: WhatsApp ya no entrega respuestas, solo una plantilla aprobada. La plantilla de seguimiento le invita a volver a escribir.",
    ),
    (
        "Send the follow-up template",
        "Enviar la plantilla de seguimiento",
    ),
    (
        "Save as a test (<code>tests/conversations/</code>, personal data replaced):",
        "Guardar como prueba (<code>tests/conversations/</code>, con los datos personales sustituidos):",
    ),
    ("the test", "la prueba"),
    ("its recorded answers", "sus respuestas grabadas"),
    ("and", "y"),
    (
        "run them with <code>zaguan test</code>.",
        "se ejecutan con <code>zaguan test</code>.",
    ),
    ("Replies sent", "Respuestas enviadas"),
    ("Part", "Parte"),
    ("Attempts", "Intentos"),
    ("Why not delivered", "Por qué no se entregó"),
    ("None.", "Ninguna."),
    ("customer", "cliente"),
    ("bot", "bot"),
    (
        "{agent} handed over ({tool})",
        "{agent} pasó el turno ({tool})",
    ),
    ("{agent} handed back", "{agent} devolvió el turno"),
    ("{agent} called {tool}", "{agent} llamó a {tool}"),
    ("result", "resultado"),
    ("Forget {who}", "Olvidar {who}"),
    ("Forget {who}?", "¿Olvidar {who}?"),
    (
        "Deletes the conversation, its history, inbox, replies, LLM calls and business events of this contact, as <code>zaguan users forget</code> does. Appointments, visits and offers stay (the agency's records). This cannot be undone.",
        "Borra la conversación, su historial, su bandeja de entrada, las respuestas, las llamadas al modelo y los eventos de negocio de este contacto, como hace <code>zaguan users forget</code>. Las citas, visitas y ofertas se quedan (son registros de la agencia). No se puede deshacer.",
    ),
    ("Forget for good", "Olvidar para siempre"),
    ("Cancel", "Cancelar"),
    // Notices of actions.
    (
        "Sent back to the primary assistant.",
        "Devuelta al asistente principal.",
    ),
    (
        "You have the conversation: the bot is silent until you release it.",
        "Tienes la conversación: el bot calla hasta que la devuelvas.",
    ),
    (
        "Released: the bot answers again.",
        "Devuelta: el bot vuelve a responder.",
    ),
    (
        "Reply queued for WhatsApp.",
        "Respuesta en cola para WhatsApp.",
    ),
    (
        "Follow-up template queued for WhatsApp.",
        "Plantilla de seguimiento en cola para WhatsApp.",
    ),
    ("New prompt set loaded.", "Nuevo juego de prompts cargado."),
    (
        "No change in the prompts folder.",
        "Ningún cambio en la carpeta de prompts.",
    ),
    (
        "Refused: the running set stays (problems below).",
        "Rechazado: sigue el juego en uso (problemas abajo).",
    ),
    // Prompts.
    (
        "Version <code>{version}</code>, loaded {at} from <code>{dir}</code>.",
        "Versión <code>{version}</code>, cargada el {at} desde <code>{dir}</code>.",
    ),
    ("Reload now", "Recargar ahora"),
    (
        "Last edit refused {at}</b> — the running set stayed:",
        "Último cambio rechazado el {at}</b>; sigue el juego en uso:",
    ),
    ("Tools:", "Herramientas:"),
    ("Keywords:", "Palabras clave:"),
    ("Examples ({count}):", "Ejemplos ({count}):"),
    // Queue.
    ("Waiting for a person", "Esperando a una persona"),
    (
        "Oldest first. Past the SLA ({sla}) the staff on duty are escalated to, and the row is marked. This page refreshes itself; <span id=\"refreshed\">as of {now}</span>.",
        "Primero los más antiguos. Pasado el plazo ({sla}) se avisa al equipo de guardia y la fila se marca. Esta página se actualiza sola; <span id=\"refreshed\">a las {now}</span>.",
    ),
    ("Waiting", "Esperando"),
    ("Customer", "Cliente"),
    ("past SLA", "fuera de plazo"),
    ("since {at}", "desde {at}"),
    ("notice failed", "aviso fallido"),
    ("Take", "Atender"),
    (
        "Nobody is waiting for a person.",
        "Nadie espera a una persona.",
    ),
    (
        "Only the oldest {count} are shown.",
        "Solo se muestran los {count} más antiguos.",
    ),
    ("With an operator", "Con un operador"),
    ("Who has it", "Quién la tiene"),
    ("Until", "Hasta"),
    ("(you)", "(tú)"),
    ("Reply", "Respuesta"),
    ("Send", "Enviar"),
    (
        "Window closed: send the follow-up template",
        "Ventana cerrada: envía la plantilla de seguimiento",
    ),
    (
        "No conversation is with an operator.",
        "Ninguna conversación está con un operador.",
    ),
    // Visits and offers.
    ("Waiting for an outcome", "Esperando resultado"),
    ("Today", "Hoy"),
    ("Upcoming", "Próximas"),
    ("Listing", "Inmueble"),
    ("Agent", "Agente"),
    ("(agent asked)", "(preguntado al agente)"),
    ("Done", "Realizada"),
    ("No-show", "No se presentó"),
    ("Cancelled", "Cancelada"),
    ("No visits here.", "No hay visitas aquí."),
    ("Open", "Abiertas"),
    ("Answered", "Respondidas"),
    ("Made", "Hecha"),
    ("Amount", "Importe"),
    ("Accept", "Aceptar"),
    ("Reject", "Rechazar"),
    ("Counter-offer amount", "Importe de la contraoferta"),
    ("Counter", "Contraofertar"),
    ("No offers here.", "No hay ofertas aquí."),
    ("{id}: {status}", "{id}: {status}"),
    // Leads.
    (
        "Leads from the portals and the CRM",
        "Contactos de los portales y del CRM",
    ),
    ("The last {days} days.", "Los últimos {days} días."),
    ("Source", "Origen"),
    ("Received", "Recibido"),
    ("Contacted", "Contactados"),
    ("Answered back", "Respondieron"),
    ("Not contacted", "Sin contactar"),
    (
        "Median to the first message",
        "Mediana hasta el primer mensaje",
    ),
    ("Median to their answer", "Mediana hasta su respuesta"),
    (
        "No lead in the period (<code>POST /leads</code>, <code>POST /leads/email</code>).",
        "Ningún contacto en el periodo (<code>POST /leads</code>, <code>POST /leads/email</code>).",
    ),
    ("(not in the inventory)", "(no está en el inventario)"),
    ("First message", "Primer mensaje"),
    ("the e-mail", "el correo"),
    ("No leads here.", "No hay contactos aquí."),
    (
        "Only the newest {count} are shown.",
        "Solo se muestran los {count} más recientes.",
    ),
    // Operators.
    (
        "<b>{name}</b> ({role}) signs in with this password, and calls the admin API with this token. They are shown once: only their hashes are kept.",
        "<b>{name}</b> ({role}) entra con esta contraseña y llama a la API de administración con este token. Se muestran una sola vez: solo se guardan sus hashes.",
    ),
    ("API token", "Token de la API"),
    ("Sign in at", "Entrar en"),
    ("State", "Estado"),
    ("Added", "Alta"),
    ("Last sign-in", "Última entrada"),
    ("disabled {at}", "desactivado el {at}"),
    ("enabled", "activo"),
    ("never", "nunca"),
    ("{at} by {who}", "{at} por {who}"),
    (
        "Enable with a new password",
        "Activar con una contraseña nueva",
    ),
    ("New password", "Contraseña nueva"),
    ("Disable", "Desactivar"),
    (
        "Nobody yet: add the team below (or with <code>zaguan operators add</code>).",
        "Nadie todavía: añade al equipo abajo (o con <code>zaguan operators add</code>).",
    ),
    ("Add an operator", "Añadir un operador"),
    ("Shown to customers as", "Los clientes le ven como"),
    (
        "viewer: reads, numbers masked",
        "lector: lee, con los números ocultos",
    ),
    (
        "operator: takes, replies, releases, resets",
        "operador: atiende, responde, devuelve, reinicia",
    ),
    (
        "admin: also the team and exports",
        "administrador: también el equipo y las exportaciones",
    ),
    ("Add", "Añadir"),
    (
        "{name} is disabled; {ended} session(s) ended.",
        "{name} queda desactivado; {ended} sesión(es) cerrada(s).",
    ),
    // Staff and owners.
    ("Id", "Id"),
    ("Number", "Número"),
    ("Handoffs", "Derivaciones"),
    ("Zones", "Zonas"),
    ("Visit", "Visita"),
    ("Own calendar", "Calendario propio"),
    ("yes", "sí"),
    ("no", "no"),
    ("{minutes} min", "{minutes} min"),
    (
        "not read since {at}: {error}",
        "sin leer desde el {at}: {error}",
    ),
    ("read {at}", "leído el {at}"),
    ("not read yet", "aún sin leer"),
    ("active", "activo"),
    (
        "Nobody yet: add the team below (or with <code>zaguan staff add</code> or <code>zaguan staff import FILE</code>).",
        "Nadie todavía: añade al equipo abajo (o con <code>zaguan staff add</code> o <code>zaguan staff import FICHERO</code>).",
    ),
    ("Add a staff member", "Añadir a alguien del equipo"),
    ("WhatsApp number", "Número de WhatsApp"),
    (
        "Told when a customer asks for a person",
        "Recibe aviso cuando un cliente pide una persona",
    ),
    ("Cities or zones", "Ciudades o zonas"),
    ("Visit length (minutes)", "Duración de la visita (minutos)"),
    (
        "Own calendar (iCalendar address)",
        "Calendario propio (dirección iCalendar)",
    ),
    ("{name} ({id}) added.", "{name} ({id}), dado de alta."),
    (
        "{name} ({id}) is out of handoffs and visits; the record stays.",
        "{name} ({id}) deja de recibir derivaciones y visitas; su ficha se conserva.",
    ),
    ("Owners", "Propietarios"),
    ("Listings", "Inmuebles"),
    ("Edit", "Editar"),
    ("Save", "Guardar"),
    (
        "No owners yet (<code>zaguan owners add</code>).",
        "Aún no hay propietarios (<code>zaguan owners add</code>).",
    ),
    ("Add an owner", "Añadir un propietario"),
    ("Their listings", "Sus inmuebles"),
    ("Their agent (staff id)", "Su agente (id del equipo)"),
    ("{name} ({id}) saved.", "{name} ({id}), guardado."),
    ("Listings feed", "Feed de inmuebles"),
    ("Round", "Ronda"),
    ("Instance", "Instancia"),
    ("Outcome", "Resultado"),
    (
        "No scheduled import (<code>ZAGUAN_LISTINGS_FEED_URL</code>) has run.",
        "Aún no ha corrido ninguna importación programada (<code>ZAGUAN_LISTINGS_FEED_URL</code>).",
    ),
    // Reports.
    (
        "The agency, {first} to {last}",
        "La agencia, del {first} al {last}",
    ),
    ("From", "Desde"),
    ("Show", "Mostrar"),
    ("last 7 days", "últimos 7 días"),
    (
        "For every instance: read from the database, not from this process.",
        "Para todas las instancias: leído de la base de datos, no de este proceso.",
    ),
    (
        "Cut: {what} held more records than a report reads; choose a shorter period.",
        "Recortado: {what} tenía más registros de los que lee un informe; elige un periodo más corto.",
    ),
    ("Funnel", "Embudo"),
    ("Step", "Paso"),
    ("Customers", "Clientes"),
    ("Of the step before", "Del paso anterior"),
    (
        "Customers who wrote in the period; then those of them who searched or asked about a listing, booked a visit, visited, made an offer in it.",
        "Clientes que escribieron en el periodo; después, cuántos de ellos buscaron o preguntaron por un inmueble, reservaron una visita, visitaron o hicieron una oferta en él.",
    ),
    ("Wrote to us", "Nos escribieron"),
    (
        "Searched or asked about a listing",
        "Buscaron o consultaron inmuebles",
    ),
    ("Booked a visit", "Reservaron una visita"),
    ("Visited", "Visitaron"),
    ("Made an offer", "Hicieron una oferta"),
    ("How steps were decided", "Cómo se decidieron los pasos"),
    ("a model", "un modelo"),
    ("the fast path", "la vía rápida"),
    ("offline mode", "el modo sin modelo"),
    ("{count} tokens", "{count} tokens"),
    (
        "wrote on WhatsApp first",
        "escribieron primero por WhatsApp",
    ),
    ("Conversations per day", "Conversaciones por día"),
    ("conversations", "conversaciones"),
    (
        "Median time to a person (handoffs)",
        "Mediana hasta una persona (derivaciones)",
    ),
    ("{count} customers", "{count} clientes"),
    ("{count} handoffs", "{count} derivaciones"),
    ("Opted out (BAJA / STOP)", "Bajas (BAJA / STOP)"),
    ("These figures as CSV", "Estas cifras en CSV"),
    ("Steps per assistant", "Pasos por asistente"),
    (
        "Fast path and offline share",
        "Vía rápida y modo sin modelo",
    ),
    (
        "Decided without a model: <b id=\"fast-path-share\">{fast}</b> by the fast path, <b id=\"offline-share\">{offline}</b> in offline mode.",
        "Decidido sin modelo: <b id=\"fast-path-share\">{fast}</b> por la vía rápida, <b id=\"offline-share\">{offline}</b> en modo sin modelo.",
    ),
    (
        "Model cost per day by provider",
        "Coste del modelo por día y proveedor",
    ),
    (
        "Model tokens per day by provider",
        "Tokens del modelo por día y proveedor",
    ),
    ("Model cost per day (USD)", "Coste del modelo por día (USD)"),
    ("Model tokens per day", "Tokens del modelo por día"),
    ("Day", "Día"),
    (
        "No model was called in the period.",
        "No se llamó a ningún modelo en el periodo.",
    ),
    (
        "No price for {providers}: set <code>ZAGUAN_LLM_PRICES</code> to see money, not only tokens.",
        "Sin precio para {providers}: define <code>ZAGUAN_LLM_PRICES</code> para ver dinero y no solo tokens.",
    ),
    (
        "Exports for a spreadsheet",
        "Exportaciones para una hoja de cálculo",
    ),
    (
        "The period's <a href=\"/console/export/leads.csv?{query}\" id=\"export-leads\">leads</a>, <a href=\"/console/export/appointments.csv?{query}\">appointments</a> and <a href=\"/console/export/offers.csv?{query}\">offers</a> as CSV (for admins; a cell that starts like a formula is kept as text). Past {rows} rows an export is cut and its <code>X-Zaguan-Export-Next-Since</code> header says where the next page starts; <code>zaguan export</code> says so too.",
        "Los <a href=\"/console/export/leads.csv?{query}\" id=\"export-leads\">contactos</a>, las <a href=\"/console/export/appointments.csv?{query}\">citas</a> y las <a href=\"/console/export/offers.csv?{query}\">ofertas</a> del periodo en CSV (para administradores; una celda que empieza como una fórmula se guarda como texto). Pasadas {rows} filas la exportación se corta y su cabecera <code>X-Zaguan-Export-Next-Since</code> dice dónde empieza la página siguiente; <code>zaguan export</code> también lo dice.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_language_is_the_operators_choice_then_the_browsers() {
        assert_eq!(chosen(&headers(&[])), Lang::En);
        assert_eq!(
            chosen(&headers(&[("accept-language", "es-ES,es;q=0.9,en;q=0.8")])),
            Lang::Es
        );
        assert_eq!(
            chosen(&headers(&[(
                "accept-language",
                "fr-FR, en-GB;q=0.7, es;q=0.9"
            )])),
            Lang::Es
        );
        assert_eq!(
            chosen(&headers(&[("accept-language", "de, es;q=0")])),
            Lang::En
        );
        assert_eq!(
            chosen(&headers(&[
                ("accept-language", "es"),
                ("cookie", "zaguan_console=abc; zaguan_console_lang=en"),
            ])),
            Lang::En
        );
    }

    /// Every `t("…")` of every template and every `tr("…")` of the console's code has its
    /// Spanish, and no Spanish is left that nothing asks for.
    #[test]
    fn every_text_has_its_spanish() {
        let sources = [
            include_str!("templates/layout.html"),
            include_str!("templates/sign_in.html"),
            include_str!("templates/overview.html"),
            include_str!("templates/conversations.html"),
            include_str!("templates/conversation.html"),
            include_str!("templates/transcript.html"),
            include_str!("templates/forget.html"),
            include_str!("templates/prompts.html"),
            include_str!("templates/operators.html"),
            include_str!("templates/staff.html"),
            include_str!("templates/visits.html"),
            include_str!("templates/offers.html"),
            include_str!("templates/leads.html"),
            include_str!("templates/queue.html"),
            include_str!("templates/reports.html"),
            include_str!("templates/queue_rows.html"),
            include_str!("mod.rs"),
            include_str!("actions.rs"),
            include_str!("follow_ups.rs"),
            include_str!("leads.rs"),
            include_str!("operators.rs"),
            include_str!("pages.rs"),
            include_str!("queue.rs"),
            include_str!("reports.rs"),
            include_str!("sign_in.rs"),
            include_str!("staff.rs"),
        ];
        let mut asked = Vec::new();
        for source in sources {
            for opener in ["t(", "tr("] {
                for (i, _) in source.match_indices(opener) {
                    let before = source[..i].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                        continue;
                    }
                    let Some(rest) = source[i + opener.len()..].trim_start().strip_prefix('"')
                    else {
                        continue;
                    };
                    let mut key = String::new();
                    let mut chars = rest.chars();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => key.push(chars.next().unwrap_or('\\')),
                            '"' => break,
                            c => key.push(c),
                        }
                    }
                    asked.push(key);
                }
            }
        }
        assert!(asked.len() > 150, "only {} texts found", asked.len());
        let missing: Vec<&String> = asked
            .iter()
            .filter(|k| !catalog().contains_key(k.as_str()))
            .collect();
        assert!(missing.is_empty(), "no Spanish for {missing:#?}");
        let values = [
            "new",
            "contacted",
            "answered",
            "unreachable",
            "uncontactable",
            "unreadable",
            "viewer",
            "operator",
            "admin",
            "prospect",
            "owner",
            "agent",
            "primary",
            "booked",
            "done",
            "no_show",
            "cancelled",
            "submitted",
            "accepted",
            "rejected",
            "countered",
            "withdrawn",
            "queued",
            "sent",
            "delivered",
            "read",
            "played",
            "failed",
            "skipped",
            "sending",
            "template",
            "media",
            "text",
            "Wrote to us",
            "Searched or asked about a listing",
            "Booked a visit",
            "Visited",
            "Made an offer",
        ];
        let unused: Vec<&&str> = catalog()
            .keys()
            .filter(|k| !asked.iter().any(|a| a == *k) && !values.contains(k))
            .collect();
        assert!(
            unused.is_empty(),
            "Spanish that nothing asks for: {unused:#?}"
        );
        assert_eq!(
            catalog().len(),
            SPANISH.len(),
            "a text is in the catalog twice"
        );
    }

    #[test]
    fn values_are_escaped_and_the_catalog_markup_kept() {
        let locale = Locale {
            lang: Lang::Es,
            tz: chrono_tz::Europe::Madrid,
        };
        let mut env = minijinja::Environment::new();
        env.add_function("t", t);
        let html = with(locale, || {
            env.render_str(
                r#"{{ t("Reply as {operator}", operator=name) }}"#,
                minijinja::context! { name => "<b>Ana</b>" },
            )
        })
        .unwrap();
        assert_eq!(html, "Responder como &lt;b&gt;Ana&lt;/b&gt;");
        let instant = DateTime::parse_from_rfc3339("2026-07-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(with(locale, || at(instant)), "01/07/2026 12:00");
        assert_eq!(at(instant), "01/07/2026 10:00");
    }
}
