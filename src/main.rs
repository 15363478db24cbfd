//! The binary: parse the command line, set up logging, hand over to the library.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use history_consumer::cli::{Cli, Command};
use history_consumer::config::recovery::{RewindSettings, VerifySettings};
use history_consumer::config::{Settings, key};
use history_consumer::startup::Application;
use tracing_subscriber::EnvFilter;

// jemalloc, not glibc's malloc: with glibc the service's CPU per record grew by ~40 % once the
// process had run a while (heap fragmentation; malloc/free were a fifth of the actor thread's
// samples), measured in BENCHMARKS.md's notes. Cargo.toml also has jemalloc export `malloc`
// and `free` themselves, so that librdkafka's C allocations (an op and a message per record,
// made on a broker thread and freed on the driver's) take it too, not glibc's arenas.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // verify's own codes: 1 when events are missing, 2 when it could not verify.
    let failed = match cli.command {
        Command::Verify(_) => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    };
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            // One line, each cause once (a backtrace would bury the message).
            eprintln!(
                "Error: {}",
                history_consumer::error_text::chain(error.as_ref())
            );
            failed
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_new(cli.log_filter())
                .with_context(|| format!("invalid {} filter", key::LOG))?,
        )
        .with_writer(std::io::stderr)
        .init();
    actix_web::rt::System::new().block_on(async move {
        match cli.command {
            Command::Run(args) => {
                let settings = Settings::from_run_args(*args)?;
                // None: stopped by a signal while it waited for the database.
                if let Some(application) = Application::build_waiting(settings).await? {
                    application.run_until_stopped().await?;
                }
            }
            #[cfg(feature = "tools")]
            Command::Demo(args) => history_consumer::tools::demo::run(args).await?,
            #[cfg(feature = "tools")]
            Command::Bench(args) => history_consumer::tools::bench::run(args).await?,
            #[cfg(feature = "tools")]
            Command::Docs(args) => print!("{}", args.page.render()?),
            #[cfg(feature = "tools")]
            Command::Produce(args) => {
                history_consumer::tools::produce::run(args).await?;
            }
            Command::Verify(args) => {
                let settings = VerifySettings::from_args(args)?;
                let report = history_consumer::recovery::verify::run(&settings).await?;
                if settings.json {
                    println!("{}", serde_json::to_string_pretty(&report)?);
                } else {
                    print!("{}", report.render());
                }
                if !report.whole {
                    return Ok(ExitCode::FAILURE);
                }
            }
            Command::Rewind(args) => {
                let settings = RewindSettings::from_args(args)?;
                let report = history_consumer::recovery::rewind::run(&settings).await?;
                if settings.json {
                    println!("{}", serde_json::to_string_pretty(&report)?);
                } else {
                    print!("{}", report.render());
                }
            }
            Command::Migrate(args) => {
                let pool = args.database()?.pool(1)?;
                let report = history_consumer::inbox::migrate_pool(&pool).await?;
                if report.applied.is_empty() {
                    println!("database is up to date");
                } else {
                    for file in report.applied {
                        println!("applied {file}");
                    }
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
