//! Voice notes in: many customers talk rather than type. An `audio` message carries only a media
//! id; its bytes come from the Graph API (media id → a short-lived URL → the bytes, both with
//! the access token), and an OpenAI-compatible `POST /audio/transcriptions` turns them into the
//! text the turn runs on. The bytes live in memory for the call only: never logged, never stored.
//!
//! Every step is bounded (a timeout per call, WhatsApp's 16 MB audio limit) and every failure is
//! a [`VoiceError`] the engine answers with its polite «write it to me» reply.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::multipart::{Form, Part};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

/// WhatsApp's limit for audio: larger bodies are refused before they are read whole.
pub const MAX_AUDIO_BYTES: u64 = 16 * 1024 * 1024;

/// Why a voice note has no transcript.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoiceError {
    #[error("download failed: {0}")]
    Download(String),
    #[error("{0} bytes is over the {MAX_AUDIO_BYTES}-byte limit")]
    TooLarge(u64),
    #[error("not audio: `{0}`")]
    NotAudio(String),
    #[error("transcription failed: {0}")]
    Transcription(String),
    #[error("the transcript is empty")]
    Empty,
}

impl VoiceError {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            VoiceError::Download(_) => "download_failed",
            VoiceError::TooLarge(_) => "too_large",
            VoiceError::NotAudio(_) => "not_audio",
            VoiceError::Transcription(_) => "transcription_failed",
            VoiceError::Empty => "empty",
        }
    }
}

/// An audio file in memory.
#[derive(Clone, PartialEq, Eq)]
pub struct Audio {
    pub bytes: Vec<u8>,
    /// `audio/ogg; codecs=opus` for a WhatsApp voice note.
    pub mime_type: String,
}

impl std::fmt::Debug for Audio {
    /// The bytes are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Audio({} bytes, {})", self.bytes.len(), self.mime_type)
    }
}

/// Speech to text.
#[async_trait]
pub trait Transcriber: Send + Sync {
    /// The text spoken in `audio`; `language` (ISO 639-1) when the conversation's is known.
    async fn transcribe(&self, audio: Audio, language: Option<&str>) -> Result<String, VoiceError>;
}

/// Where voice notes' bytes come from.
#[async_trait]
pub trait MediaSource: Send + Sync {
    async fn download(&self, media_id: &str) -> Result<Audio, VoiceError>;
}

/// A voice note's media id to its transcript: download, then transcribe.
pub struct VoiceNotes {
    media: Box<dyn MediaSource>,
    transcriber: Box<dyn Transcriber>,
}

impl VoiceNotes {
    pub fn new(media: impl MediaSource + 'static, transcriber: impl Transcriber + 'static) -> Self {
        Self {
            media: Box::new(media),
            transcriber: Box::new(transcriber),
        }
    }

    pub async fn transcript(
        &self,
        media_id: &str,
        language: Option<&str>,
    ) -> Result<String, VoiceError> {
        let audio = self.media.download(media_id).await?;
        let text = self.transcriber.transcribe(audio, language).await?;
        let text = text.trim();
        if text.is_empty() {
            return Err(VoiceError::Empty);
        }
        Ok(text.to_owned())
    }
}

/// The Graph API's media endpoints, with the business's access token.
pub struct GraphMedia {
    http: reqwest::Client,
    /// `WHATSAPP_API_BASE_URL`, e.g. `https://graph.facebook.com/v21.0`.
    base: Url,
    token: SecretString,
}

/// `GET /{media-id}`: where the bytes are, for a few minutes.
#[derive(Deserialize)]
struct MediaInfo {
    url: String,
    mime_type: Option<String>,
    file_size: Option<u64>,
}

impl GraphMedia {
    pub fn new(base: Url, token: SecretString, timeout: Duration) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(Self { http, base, token })
    }

    async fn get(&self, url: &str) -> Result<reqwest::Response, VoiceError> {
        let response = self
            .http
            .get(url)
            .bearer_auth(self.token.expose_secret())
            .send()
            .await
            // Without the URL: media URLs carry signed tokens.
            .map_err(|e| VoiceError::Download(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(VoiceError::Download(format!("HTTP {}", response.status())));
        }
        Ok(response)
    }
}

#[async_trait]
impl MediaSource for GraphMedia {
    async fn download(&self, media_id: &str) -> Result<Audio, VoiceError> {
        let mut info_url = self.base.clone();
        info_url
            .path_segments_mut()
            .map_err(|()| VoiceError::Download("unusable base URL".into()))?
            .pop_if_empty()
            .push(media_id);
        let info: MediaInfo = self
            .get(info_url.as_str())
            .await?
            .json()
            .await
            .map_err(|e| VoiceError::Download(format!("unreadable media info: {e}")))?;
        let mime_type = info.mime_type.unwrap_or_default();
        if !mime_type.starts_with("audio/") {
            return Err(VoiceError::NotAudio(mime_type));
        }
        if let Some(size) = info.file_size.filter(|&size| size > MAX_AUDIO_BYTES) {
            return Err(VoiceError::TooLarge(size));
        }
        let mut response = self.get(&info.url).await?;
        if let Some(size) = response
            .content_length()
            .filter(|&size| size > MAX_AUDIO_BYTES)
        {
            return Err(VoiceError::TooLarge(size));
        }
        // Read in chunks so a server that lied about the size is cut at the limit.
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| VoiceError::Download(e.without_url().to_string()))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > MAX_AUDIO_BYTES {
                return Err(VoiceError::TooLarge(bytes.len() as u64));
            }
        }
        Ok(Audio { bytes, mime_type })
    }
}

/// An OpenAI-compatible `POST {base}/audio/transcriptions` (`LLM_TRANSCRIBE=openai:MODEL`, with
/// `OPENAI_BASE_URL` and `OPENAI_API_KEY`).
pub struct OpenAiTranscriber {
    http: reqwest::Client,
    base: Url,
    key: SecretString,
    model: String,
}

#[derive(Deserialize)]
struct TranscriptionJson {
    text: String,
}

impl OpenAiTranscriber {
    pub fn new(
        base: Url,
        key: SecretString,
        model: String,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()?;
        Ok(Self {
            http,
            base,
            key,
            model,
        })
    }
}

#[async_trait]
impl Transcriber for OpenAiTranscriber {
    async fn transcribe(&self, audio: Audio, language: Option<&str>) -> Result<String, VoiceError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| VoiceError::Transcription("unusable base URL".into()))?
            .pop_if_empty()
            .extend(["audio", "transcriptions"]);
        // The spec asks for a file name whose extension says the format.
        let essence = audio.mime_type.split(';').next().unwrap_or_default().trim();
        let extension = match essence {
            "audio/ogg" | "audio/opus" => "ogg",
            "audio/mpeg" | "audio/mp3" => "mp3",
            "audio/mp4" | "audio/m4a" | "audio/x-m4a" | "audio/aac" => "m4a",
            "audio/amr" => "amr",
            "audio/wav" | "audio/x-wav" => "wav",
            "audio/webm" => "webm",
            _ => "ogg",
        };
        let file = Part::bytes(audio.bytes)
            .file_name(format!("voice-note.{extension}"))
            .mime_str(essence)
            .map_err(|e| VoiceError::Transcription(e.to_string()))?;
        let mut form = Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("response_format", "json");
        if let Some(language) = language {
            let primary = language.split(['-', '_']).next().unwrap_or(language);
            form = form.text("language", primary.to_ascii_lowercase());
        }
        let response = self
            .http
            .post(url)
            .bearer_auth(self.key.expose_secret())
            .multipart(form)
            .send()
            .await
            .map_err(|e| VoiceError::Transcription(e.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_default();
            return Err(VoiceError::Transcription(format!(
                "HTTP {status} {message}"
            )));
        }
        let answer: TranscriptionJson = response
            .json()
            .await
            .map_err(|e| VoiceError::Transcription(format!("unreadable answer: {e}")))?;
        Ok(answer.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_never_prints_its_bytes() {
        let audio = Audio {
            bytes: b"secret voice".to_vec(),
            mime_type: "audio/ogg".into(),
        };
        assert_eq!(format!("{audio:?}"), "Audio(12 bytes, audio/ogg)");
    }

    #[test]
    fn errors_have_metric_labels() {
        assert_eq!(VoiceError::TooLarge(1).label(), "too_large");
        assert_eq!(VoiceError::Empty.label(), "empty");
    }
}
