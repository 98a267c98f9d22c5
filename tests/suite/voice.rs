//! Voice notes in, against local HTTP servers: a fake Graph API that serves the media (media id →
//! URL → bytes, each with the access token) and a fake OpenAI-compatible transcription endpoint
//! that checks the multipart request against `CreateTranscriptionRequest` from OpenAI's OpenAPI
//! description. The transcript runs as the user's message; every failure gets the polite answer.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use chrono::Utc;
use secrecy::SecretString;
use serde_json::{Value, json};
use zaguan::agents::AgentRegistry;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::{LlmRequest, ScriptedLlm};
use zaguan::store::{InboxEntry, InboxStatus, Store};
use zaguan::voice::{GraphMedia, OpenAiTranscriber, VoiceNotes};

const TOKEN: &str = "graph-token";
const KEY: &str = "openai-key";
/// The first bytes of an Ogg file, then padding: what a voice note looks like on the wire.
const VOICE: &[u8] = b"OggS\x00\x02fake opus voice note bytes";
const SAID: &str = "Hola, quería ver el piso de la calle Mayor el sábado por la mañana";

/// What the fake servers saw.
#[derive(Default)]
struct Seen {
    /// Paths the Graph API served, with whether the bearer token was right.
    graph: Vec<(String, bool)>,
    /// Each transcription request's fields (the file as its bytes' length and name).
    transcriptions: Vec<Value>,
    file_bytes: Vec<Vec<u8>>,
}

#[derive(Clone)]
struct Fake {
    seen: Arc<Mutex<Seen>>,
    base: Arc<Mutex<String>>,
    /// The transcription endpoint answers this status (200: the transcript).
    transcription_status: Arc<Mutex<StatusCode>>,
}

impl Fake {
    /// Records a Graph API call to `path`; whether it carried the access token.
    fn graph_call(&self, path: String, headers: &HeaderMap) -> bool {
        let ok = authorized(headers, TOKEN);
        self.seen.lock().unwrap().graph.push((path, ok));
        ok
    }
}

fn authorized(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {token}"))
}

async fn media_info(
    State(fake): State<Fake>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> axum::response::Response {
    if !fake.graph_call(format!("/v21.0/{id}"), &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let base = fake.base.lock().unwrap().clone();
    match id.as_str() {
        "MEDIA_VOICE" => axum::Json(json!({
            "messaging_product": "whatsapp",
            "url": format!("{base}/media/blob-1?signature=secret"),
            "mime_type": "audio/ogg; codecs=opus",
            "sha256": "x",
            "file_size": VOICE.len(),
            "id": id,
        }))
        .into_response(),
        "MEDIA_HUGE" => axum::Json(json!({
            "url": format!("{base}/media/blob-1"),
            "mime_type": "audio/ogg",
            "file_size": 40 * 1024 * 1024,
            "id": id,
        }))
        .into_response(),
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": {"message": "media not found", "code": 100}})),
        )
            .into_response(),
    }
}

async fn media_bytes(
    State(fake): State<Fake>,
    Path(blob): Path<String>,
    headers: HeaderMap,
) -> axum::response::Response {
    if !fake.graph_call(format!("/media/{blob}"), &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    ([("content-type", "audio/ogg")], VOICE.to_vec()).into_response()
}

async fn transcriptions(
    State(fake): State<Fake>,
    headers: HeaderMap,
    mut form: Multipart,
) -> axum::response::Response {
    assert!(authorized(&headers, KEY), "the OpenAI key is sent");
    let mut fields = serde_json::Map::new();
    let mut bytes = Vec::new();
    while let Some(field) = form.next_field().await.unwrap() {
        let name = field.name().unwrap().to_owned();
        if name == "file" {
            let file_name = field.file_name().map(str::to_owned);
            let content_type = field.content_type().map(str::to_owned);
            bytes = field.bytes().await.unwrap().to_vec();
            fields.insert("file".into(), json!("<binary>"));
            fields.insert("_file_name".into(), json!(file_name));
            fields.insert("_content_type".into(), json!(content_type));
        } else {
            fields.insert(name, json!(field.text().await.unwrap()));
        }
    }
    let mut seen = fake.seen.lock().unwrap();
    seen.transcriptions.push(Value::Object(fields));
    seen.file_bytes.push(bytes);
    let status = *fake.transcription_status.lock().unwrap();
    if status != StatusCode::OK {
        return (
            status,
            axum::Json(json!({"error": {"message": "the model is overloaded"}})),
        )
            .into_response();
    }
    axum::Json(json!({ "text": format!("  {SAID} ") })).into_response()
}

async fn fake_servers() -> (Fake, String) {
    let fake = Fake {
        seen: Arc::default(),
        base: Arc::default(),
        transcription_status: Arc::new(Mutex::new(StatusCode::OK)),
    };
    let app = Router::new()
        .route("/v21.0/{id}", get(media_info))
        .route("/media/{blob}", get(media_bytes))
        .route("/v1/audio/transcriptions", post(transcriptions))
        .with_state(fake.clone());
    let base = common::serve_local(app).await;
    *fake.base.lock().unwrap() = base.clone();
    (fake, base)
}

fn voice_notes(base: &str) -> VoiceNotes {
    VoiceNotes::new(
        GraphMedia::new(
            format!("{base}/v21.0").parse().unwrap(),
            SecretString::from(TOKEN),
            Duration::from_secs(5),
        )
        .unwrap(),
        OpenAiTranscriber::new(
            format!("{base}/v1").parse().unwrap(),
            SecretString::from(KEY),
            "whisper-1".into(),
            Duration::from_secs(5),
        )
        .unwrap(),
    )
}

struct Harness {
    engine: Engine,
    store: Arc<dyn Store>,
    llm: Arc<ScriptedLlm>,
    wa_id: WaId,
}

impl Harness {
    fn new(store: Arc<dyn Store>, llm: ScriptedLlm, voice: Option<VoiceNotes>) -> Self {
        let tools = ToolRegistry::new();
        let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        let agents =
            Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap());
        let llm = Arc::new(llm);
        let mut engine = Engine::new(
            store.clone(),
            llm.clone(),
            agents,
            Arc::new(tools),
            EngineSettings::default(),
        );
        if let Some(voice) = voice {
            engine = engine.with_voice_notes(Arc::new(voice));
        }
        Self {
            engine,
            store,
            llm,
            wa_id: WaId::parse("34600999111").unwrap(),
        }
    }

    /// A voice note whose media id is `media_id` arrives; the turn's reply.
    async fn voice_note(&self, wamid: &str, media_id: &str) -> Option<String> {
        let payload = json!({
            "from": self.wa_id.as_str(), "id": wamid, "timestamp": common::now_timestamp(), "type": "audio",
            "audio": {"id": media_id, "mime_type": "audio/ogg; codecs=opus", "voice": true},
        });
        let entry = InboxEntry {
            wamid: WaMessageId::parse(wamid).unwrap(),
            wa_id: self.wa_id.clone(),
            phone_number_id: "109876543210".into(),
            kind: "audio".into(),
            text: None,
            payload: payload.to_string(),
            content: zaguan::webhook::payload::message_content(&payload),
            context_id: None,
            sent_at: None,
            status: InboxStatus::Pending,
            received_at: Utc::now(),
            attempts: 0,
        };
        self.store.insert_inbox(&[entry]).await.unwrap();
        let open = self.store.open_inbox(&self.wa_id).await.unwrap();
        let outcome = self.engine.run_turn(&self.wa_id, &open).await.unwrap();
        self.store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await
            .unwrap();
        outcome.reply
    }
}

fn polite_answer() -> &'static str {
    "¡Gracias! Por aquí todavía no puedo abrir imágenes, audios ni archivos. ¿Me cuentas por \
     escrito qué necesitas?"
}

async fn a_voice_note_is_transcribed_and_answered(store: Arc<dyn Store>) {
    let (fake, base) = fake_servers().await;
    let h = Harness::new(
        store,
        // The transcript asks for a visit: the fast path takes it to the appointments.
        ScriptedLlm::new().says(
            "appointment_assistant",
            "¡Claro! ¿A qué hora te viene bien?",
        ),
        Some(voice_notes(&base)),
    );
    assert_eq!(
        h.voice_note("wamid.VOICE1", "MEDIA_VOICE").await.as_deref(),
        Some("¡Claro! ¿A qué hora te viene bien?")
    );
    // The model read the transcript as the user's words, marked as a voice note.
    let requests: Vec<LlmRequest> = h.llm.requests();
    let human = common::last_human(&requests[0]);
    assert_eq!(human, format!("(voice note) {SAID}"));

    let seen = fake.seen.lock().unwrap();
    assert_eq!(
        seen.graph,
        [
            ("/v21.0/MEDIA_VOICE".to_owned(), true),
            ("/media/blob-1".to_owned(), true)
        ]
    );
    assert_eq!(seen.file_bytes, [VOICE.to_vec()]);
    let request = &seen.transcriptions[0];
    assert_eq!(request["model"], "whisper-1");
    assert_eq!(request["_file_name"], "voice-note.ogg");
    assert_eq!(request["_content_type"], "audio/ogg");
    // What was sent is a valid CreateTranscriptionRequest.
    let validator = common::spec::spec_validator("CreateTranscriptionRequest");
    let mut fields = request.as_object().unwrap().clone();
    fields.retain(|name, _| !name.starts_with('_'));
    let fields = Value::Object(fields);
    let errors: Vec<String> = validator
        .iter_errors(&fields)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{fields}: {errors:?}");
    // And the schema does refuse what it should: a field it does not know.
    let mut bogus = fields.clone();
    bogus["voice_note"] = json!(true);
    assert!(
        !validator.is_valid(&bogus),
        "the schema refuses unknown fields"
    );
}

async fn a_failed_download_or_transcription_gets_the_polite_answer(store: Arc<dyn Store>) {
    let (fake, base) = fake_servers().await;
    let h = Harness::new(store, ScriptedLlm::new(), Some(voice_notes(&base)));
    // The media is gone.
    assert_eq!(
        h.voice_note("wamid.VOICE2", "MEDIA_GONE").await.as_deref(),
        Some(polite_answer())
    );
    // Over WhatsApp's 16 MB: refused before any byte is downloaded.
    assert_eq!(
        h.voice_note("wamid.VOICE3", "MEDIA_HUGE").await.as_deref(),
        Some(polite_answer())
    );
    // The transcription provider fails.
    *fake.transcription_status.lock().unwrap() = StatusCode::SERVICE_UNAVAILABLE;
    assert_eq!(
        h.voice_note("wamid.VOICE4", "MEDIA_VOICE").await.as_deref(),
        Some(polite_answer())
    );
    assert_eq!(
        h.llm.requests().len(),
        0,
        "no model call for what nobody could read"
    );
    let seen = fake.seen.lock().unwrap();
    let fetched = seen
        .graph
        .iter()
        .filter(|(path, _)| path == "/media/blob-1");
    assert_eq!(fetched.count(), 1, "only the last one was downloaded");
    assert_eq!(seen.transcriptions.len(), 1);
}

async fn without_a_transcription_provider_the_polite_answer_stays(store: Arc<dyn Store>) {
    let h = Harness::new(store, ScriptedLlm::new(), None);
    assert_eq!(
        h.voice_note("wamid.VOICE5", "MEDIA_VOICE").await.as_deref(),
        Some(polite_answer())
    );
}

crate::both_stores!(
    a_voice_note_is_transcribed_and_answered,
    a_failed_download_or_transcription_gets_the_polite_answer,
    without_a_transcription_provider_the_polite_answer_stays,
);
