//! Start-up wiring shared by `zaguan serve` and the CLI: the store and the business data over
//! one MongoDB client, the LLM chain, the outbound channel, the engine with its tools — built
//! here once, so every command runs the same service.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::agents::AgentRegistry;
use crate::config::Config;
use crate::engine::Engine;
use crate::engine::handoff::{HandoffDesk, RequestHuman};
use crate::engine::roles::RoleDirectory;
use crate::llm::{AnthropicClient, FallbackChain, Llm, LlmProvider, OfflineLlm, OpenAiClient};
use crate::outbound::{GraphClient, Limiters, Outbound, OutboundSettings};
use crate::realestate::context::RealEstateContext;
use crate::realestate::roles::DataRoles;
use crate::realestate::{MemoryRealEstate, MongoRealEstate, RealEstateStore, demo};
use crate::runtime::UsageRecorder;
use crate::store::{MemoryStore, MongoPool, MongoStore, Store};
use crate::voice::{GraphMedia, OpenAiTranscriber, VoiceNotes};

/// The domain tools a prompt may list in `tools`; the engine and `zaguan prompts check` both
/// ask here, so they agree on what is valid.
pub fn known_tools() -> BTreeSet<String> {
    crate::realestate::tools::TOOL_NAMES
        .iter()
        .chain([
            &crate::engine::handoff::REQUEST_HUMAN,
            &crate::engine::consent::RECORD_OPT_OUT,
            &crate::realestate::tools::REQUEST_CALLBACK,
            &crate::realestate::tools::REQUEST_LISTING_CHANGE,
        ])
        .map(|name| (*name).to_owned())
        .collect()
}

/// The engine over `store`: the agents of the prompts folder (a bad prompt set refuses to
/// start, with every problem listed), the tools, and the LLM chain, whose calls go to `usage`.
pub fn build_engine(
    config: &Config,
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
    usage: Option<UsageRecorder>,
) -> anyhow::Result<Engine> {
    let registry = load_prompts(config)?;
    let decisions = usage.clone();
    let llm = llm_chain(config, usage)?;
    let engine = assemble_engine(
        config.engine.clone(),
        config,
        store,
        realestate,
        llm,
        Arc::new(registry),
    );
    let engine = match decisions {
        Some(log) => engine.with_call_log(Arc::new(log)),
        None => engine,
    };
    Ok(match voice_notes(config)? {
        Some(voice) => engine.with_voice_notes(Arc::new(voice)),
        None => engine,
    })
}

/// The prompts folder loaded and checked, its warnings logged.
pub fn load_prompts(config: &Config) -> anyhow::Result<AgentRegistry> {
    let registry = AgentRegistry::load(&config.prompts_dir, &crate::startup::known_tools())
        .map_err(|problems| {
            for problem in &problems {
                eprintln!("{problem}");
            }
            anyhow::anyhow!(
                "{} problem(s) in the prompts folder {}; run `zaguan prompts check`",
                problems.len(),
                config.prompts_dir.display()
            )
        })?;
    tracing::info!(
        agents = registry.agents().count(),
        version = %registry.version(),
        "prompts loaded"
    );
    for warning in registry.warnings() {
        tracing::warn!("{warning}");
    }
    Ok(registry)
}

/// The engine over `store` and the agency's data, answering with `llm` from `registry`: the
/// domain tools, the handoff desk, roles and context from the business data. `serve`, `chat`
/// and `zaguan test` (with its own clock and model) build it here.
pub fn assemble_engine(
    settings: crate::engine::EngineSettings,
    config: &Config,
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
    llm: Arc<dyn Llm>,
    registry: Arc<AgentRegistry>,
) -> Engine {
    let roles = Arc::new(RoleDirectory::new(Arc::new(DataRoles(realestate.clone()))));
    let realestate_for_offline = realestate.clone();
    let context = Arc::new(RealEstateContext::new(
        realestate.clone(),
        settings.timezone,
    ));
    let desk = Arc::new(HandoffDesk::new(
        store.clone(),
        Some(Arc::new(DataRoles(realestate.clone()))),
        config.handoffs.clone(),
    ));
    let tools = crate::realestate::tools::registry(realestate.clone())
        .with(RequestHuman::new(desk.clone()))
        .with(crate::engine::consent::RecordOptOut::new(store.clone()))
        .with(crate::realestate::tools::RequestCallback::new(
            realestate.clone(),
            desk.clone(),
        ))
        .with(crate::realestate::tools::RequestListingChange::new(
            realestate.clone(),
            desk.clone(),
        ));
    let presses = Arc::new(crate::realestate::follow_up::FollowUpPresses::new(
        realestate,
        store.clone(),
    ));
    Engine::new(store, llm, registry, Arc::new(tools), settings)
        .with_handoffs(desk)
        .with_presses(presses)
        .with_roles(roles)
        .with_context(context)
        .with_offline(Arc::new(crate::realestate::offline::OfflineAgency::new(
            realestate_for_offline,
        )))
}

/// Voice notes to text when `LLM_TRANSCRIBE` is set and both keys it needs are there: the
/// Graph API's (to download) and OpenAI's (to transcribe). Otherwise voice notes get the polite
/// answer, and start-up says why.
fn voice_notes(config: &Config) -> anyhow::Result<Option<VoiceNotes>> {
    let Some(model) = &config.llm.transcribe else {
        return Ok(None);
    };
    let (Some(token), Some(key)) = (
        config.whatsapp.graph.access_token.clone(),
        config.llm.openai_api_key.clone(),
    ) else {
        tracing::warn!(
            "LLM_TRANSCRIBE is set but WHATSAPP_ACCESS_TOKEN or OPENAI_API_KEY is not: voice \
             notes get the polite answer"
        );
        return Ok(None);
    };
    let timeout = config.llm.transcribe_timeout;
    tracing::info!(model = %model, "voice notes are transcribed");
    Ok(Some(VoiceNotes::new(
        GraphMedia::new(config.whatsapp.graph.api_base_url.clone(), token, timeout)?,
        OpenAiTranscriber::new(
            config.llm.openai_base_url.clone(),
            key,
            model.clone(),
            timeout,
        )?,
    )))
}

/// The outbound channel: the Graph API with `WHATSAPP_ACCESS_TOKEN` (a dry run without it),
/// Meta's limits as configured.
pub fn outbound(config: &Config, store: Arc<dyn Store>) -> anyhow::Result<Outbound> {
    let whatsapp = &config.whatsapp.graph;
    let graph = GraphClient::new(
        whatsapp.api_base_url.clone(),
        whatsapp.access_token.clone(),
        whatsapp.api_timeout,
    )?;
    Ok(Outbound::new(
        store,
        graph,
        Limiters::new(&whatsapp.limits),
        OutboundSettings {
            // A call that timed out elsewhere has ended well before a part is sent again.
            unconfirmed_grace: (whatsapp.api_timeout * 2).max(Duration::from_secs(30)),
            ..OutboundSettings::default()
        },
    ))
}

/// The HTTP clients' own timeout, a backstop behind the policy's: the policy's fires first, so
/// a slow provider is reported as a timeout of the chain.
const HTTP_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// `LLM_PRIMARY` then `LLM_FALLBACK`, each when it can be reached: a key, or a self-hosted base
/// URL (such servers often need no key). With neither, offline mode: the offline engine
/// serves the assistants from the agency's data (see [`crate::engine::offline`]).
pub fn llm_chain(config: &Config, usage: Option<UsageRecorder>) -> anyhow::Result<Arc<dyn Llm>> {
    let mut providers: Vec<(String, Arc<dyn Llm>)> = Vec::new();
    for spec in [&config.llm.primary, &config.llm.fallback] {
        if let Some(client) = provider(config, spec)? {
            tracing::info!(llm = %spec, "LLM in the chain");
            providers.push((spec.to_string(), client));
        }
    }
    if providers.is_empty() {
        tracing::warn!(
            "no LLM API key: offline mode, the assistants are served from the agency's data \
             without a model (set OPENAI_API_KEY or ANTHROPIC_API_KEY)"
        );
        return Ok(Arc::new(OfflineLlm));
    }
    let chain = FallbackChain::new(providers, config.llm.policy.clone());
    Ok(Arc::new(match usage {
        Some(usage) => chain.with_call_log(Arc::new(usage)),
        None => chain,
    }))
}

/// One provider's client for `spec`, when its key (or a local server) is configured.
pub fn provider(
    config: &Config,
    spec: &crate::llm::LlmSpec,
) -> anyhow::Result<Option<Arc<dyn Llm>>> {
    let http_timeout = config.llm.policy.timeout + HTTP_TIMEOUT_MARGIN;
    let llm = &config.llm;
    let client: Option<Arc<dyn Llm>> = match spec.provider {
        LlmProvider::OpenAi
            if llm.openai_api_key.is_some()
                || llm.openai_base_url.as_str() != "https://api.openai.com/v1" =>
        {
            Some(Arc::new(
                OpenAiClient::new(
                    llm.openai_base_url.clone(),
                    llm.openai_api_key.clone(),
                    spec.model.clone(),
                    http_timeout,
                )?
                .with_transport(
                    llm.http2,
                    llm.policy.max_concurrency,
                    http_timeout,
                )?,
            ))
        }
        LlmProvider::Anthropic
            if llm.anthropic_api_key.is_some()
                || llm.anthropic_base_url.as_str() != "https://api.anthropic.com/" =>
        {
            Some(Arc::new(
                AnthropicClient::new(
                    llm.anthropic_base_url.clone(),
                    llm.anthropic_api_key.clone(),
                    spec.model.clone(),
                    llm.max_tokens,
                    http_timeout,
                )?
                .with_transport(
                    llm.http2,
                    llm.policy.max_concurrency,
                    http_timeout,
                )?,
            ))
        }
        _ => {
            tracing::warn!(llm = %spec, "no API key for this model: not used");
            None
        }
    };
    Ok(client)
}

/// The process's one MongoDB client (shared by the conversation store and the agency's data,
/// so one gate bounds everything the process asks of the database), when `MONGODB_URI` is set.
pub async fn open_pool(config: &Config) -> anyhow::Result<Option<MongoPool>> {
    let Some(mongo) = &config.mongodb else {
        return Ok(None);
    };
    let pool = MongoPool::connect(mongo, None).await?;
    tracing::info!(database = %mongo.database, lanes = ?pool.lane_sizes(), "using MongoDB");
    Ok(Some(pool))
}

/// MongoDB over `pool` (indexes created in the background, retried until the server
/// answers), else the in-memory store.
pub fn open_store(pool: Option<&MongoPool>) -> Arc<dyn Store> {
    let Some(pool) = pool else {
        tracing::warn!(
            "MONGODB_URI is unset: using the in-memory store; nothing is durable, \
             conversations are lost on restart"
        );
        return Arc::new(MemoryStore::new());
    };
    let store = MongoStore::over(pool.clone());
    let indexer = store.clone();
    tokio::spawn(async move {
        let mut delay = Duration::from_secs(1);
        loop {
            match indexer.ensure_indexes().await {
                Ok(()) => {
                    tracing::info!("MongoDB indexes in place");
                    match indexer.reopen_processing().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(
                            messages = n,
                            "inbox messages left `processing` reopened"
                        ),
                        Err(error) => {
                            tracing::warn!("cannot reopen `processing` messages: {error}")
                        }
                    }
                    break;
                }
                Err(error) => {
                    tracing::error!(
                        "MongoDB indexes not created yet, retrying in {delay:?}: {error}"
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    });
    Arc::new(store)
}

/// The team (operators, console sessions): MongoDB over `pool` (indexes created in the
/// background), else memory.
pub fn open_team(pool: Option<&MongoPool>) -> Arc<dyn crate::admin::team::TeamStore> {
    use crate::admin::team::{MemoryTeam, MongoTeam};
    let Some(pool) = pool else {
        return Arc::new(MemoryTeam::default());
    };
    let team = MongoTeam::new(pool.clone());
    let indexer = team.clone();
    tokio::spawn(async move {
        if let Err(error) = indexer.ensure_indexes().await {
            tracing::error!("team indexes not created: {error}");
        }
    });
    Arc::new(team)
}

/// The business's data: MongoDB over `pool` (indexes created in the background), else an
/// in-memory store loaded with the demo data set, so a fresh machine has properties to talk
/// about (nothing of it is kept).
pub async fn open_realestate(
    config: &Config,
    pool: Option<&MongoPool>,
) -> anyhow::Result<Arc<dyn RealEstateStore>> {
    let Some(pool) = pool else {
        let store = MemoryRealEstate::new();
        let today = chrono::Utc::now()
            .with_timezone(&config.engine.timezone)
            .date_naive();
        let set = demo::demo_set(today, config.engine.timezone);
        let counts = demo::seed(&store, &set).await?;
        tracing::warn!(
            properties = counts.properties,
            "MONGODB_URI is unset: the real-estate data is the demo set, in memory"
        );
        return Ok(Arc::new(store));
    };
    let store = MongoRealEstate::new(pool.clone());
    let indexer = store.clone();
    tokio::spawn(async move {
        if let Err(error) = indexer.ensure_indexes().await {
            tracing::error!("real-estate indexes not created: {error}");
        }
    });
    Ok(Arc::new(store))
}
