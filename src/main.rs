//! The `zaguan` binary: parse the command line, start telemetry, load the configuration, run
//! the subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use zaguan::{admin, config::Config, serve, telemetry};

/// mimalloc rather than the system allocator: a turn is hundreds of short-lived allocations on
/// two or more threads, where glibc's malloc spent a fifth of the service's CPU (consolidating
/// and unlinking chunks) and held far more memory than was live (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its place in `mi_option_t`, the same in mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Fits the allocator to a service that holds thousands of waiting turns after a burst, unless
/// the operator set these through mimalloc's own variables (docs/performance.md, *Memory per
/// waiting turn*):
/// - no transparent huge pages: mimalloc asks for them on its arena, and a 2 MiB page stays
///   resident for one live allocation in it (about 35 MiB of the 10,000-turn run);
/// - freed pages go back to the system after 10 ms, not mimalloc 3's 1 s, so a burst's
///   garbage is not still held when the next burst comes.
fn tune_allocator() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: sets a flag of this process's memory map; the call takes no pointers.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: called first in `main`, before any other thread runs (the option is a plain
        // global of the allocator's).
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10);
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "zaguan",
    version,
    about = "WhatsApp bot service for a real-estate business"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server (webhook, health, metrics).
    Serve(serve::ServeArgs),
    /// Talk to the bot in the terminal through the same engine as WhatsApp.
    Chat(admin::cli::chat::ChatArgs),
    /// Work with the prompt files (`check` validates them).
    Prompts(admin::cli::prompts::PromptsArgs),
    /// The WhatsApp templates the service sends (`check` validates them against the account).
    Templates(admin::cli::templates::TemplatesArgs),
    /// Work with the demo data (`seed` loads listings, owners, slots, visits and offers).
    Demo(admin::cli::demo::DemoArgs),
    /// Add or change listings from a JSON file (`add FILE`, `update FILE`); saved searches
    /// hear of new and cheaper ones.
    Listings(admin::cli::listings::ListingsArgs),
    /// The agency's staff: `add`, `list`, `update ID`, `disable ID`, `import FILE`.
    Staff(admin::cli::people::StaffArgs),
    /// The owners of its listings: `add`, `list`, `update ID`, `import FILE`.
    Owners(admin::cli::people::OwnersArgs),
    /// Visits the bot booked: `list`, `outcome ID done|no-show|cancelled`.
    Appointments(admin::cli::follow_ups::AppointmentsArgs),
    /// Offers the bot took: `list [--open]`, `answer ID accept|reject|counter AMOUNT`.
    Offers(admin::cli::follow_ups::OffersArgs),
    /// Business events for the agency's CRM: `list [--failed]`, `retry ID|--failed`.
    Events(admin::cli::events::EventsArgs),
    /// Leads, appointments or offers since a moment, as CSV or JSON lines.
    Export(admin::cli::export::ExportArgs),
    /// Find, inspect and reset conversations (`list`, `show`, `reset`), against the store.
    Conversations(admin::cli::conversations::ConversationsArgs),
    /// Erase what is stored about one WhatsApp contact (`forget WA_ID`).
    Users(admin::cli::users::UsersArgs),
    /// The agency's team: named operators of the console and the admin API.
    Operators(admin::cli::operators::OperatorsArgs),
    /// Run the conversation tests (`tests/conversations/`): replayed, recorded or live.
    Test(admin::cli::test::TestArgs),
    /// Exit 0 when the local `zaguan serve` answers `GET /healthz` with 200 (container probes).
    Healthcheck(admin::cli::healthcheck::HealthcheckArgs),
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    // A command piped into `head` stops quietly when the reader goes, as command-line tools
    // do, instead of panicking on the closed pipe. The server keeps Rust's default (SIGPIPE
    // ignored): a client gone is an error to handle, not a reason to exit.
    #[cfg(unix)]
    if !matches!(cli.command, Command::Serve(_)) {
        // SAFETY: sets one signal's action back to the default, before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // Before the configuration: a probe must not fail on variables it does not use.
    if let Command::Healthcheck(args) = &cli.command {
        return admin::cli::healthcheck::run(args);
    }
    match &cli.command {
        // The dialogue stays readable: logs to a file unless asked for.
        Command::Chat(args) if !args.verbose => {
            if let Err(error) = telemetry::init_logs_to_file(&args.log_path()) {
                eprintln!(
                    "cannot open the log file {}: {error}",
                    args.log_path().display()
                );
                return ExitCode::from(2);
            }
        }
        // The report is the output; the engine's logs only when asked for with RUST_LOG.
        Command::Test(_) => telemetry::init_logs_at("off"),
        _ => telemetry::init_logs(),
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprint!("{error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args, config).await,
            Command::Chat(args) => admin::cli::chat::run(args, config).await,
            Command::Prompts(args) => admin::cli::prompts::run(args).await,
            Command::Demo(args) => admin::cli::demo::run(args, config).await,
            Command::Templates(args) => admin::cli::templates::run(args, config).await,
            Command::Listings(args) => admin::cli::listings::run(args, config).await,
            Command::Staff(args) => admin::cli::people::run_staff(args, config).await,
            Command::Owners(args) => admin::cli::people::run_owners(args, config).await,
            Command::Appointments(args) => {
                admin::cli::follow_ups::run_appointments(args, config).await
            }
            Command::Offers(args) => admin::cli::follow_ups::run_offers(args, config).await,
            Command::Events(args) => admin::cli::events::run(args, config).await,
            Command::Export(args) => admin::cli::export::run(args, config).await,
            Command::Conversations(args) => admin::cli::conversations::run(args, config).await,
            Command::Users(args) => admin::cli::users::run(args, config).await,
            Command::Operators(args) => admin::cli::operators::run(args, config).await,
            Command::Test(args) => admin::cli::test::run(args, config).await,
            Command::Healthcheck(_) => unreachable!("answered before the configuration is read"),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("zaguan: {error:#}");
            ExitCode::FAILURE
        }
    }
}
