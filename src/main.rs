//! The binary: parse the command line, set up logging, hand over to the library.

use anyhow::Context as _;
use clap::Parser;
use history_consumer::cli::{Cli, Command};
use history_consumer::config::Settings;
use history_consumer::startup::Application;
use tracing_subscriber::EnvFilter;

// jemalloc, not glibc's malloc: with glibc the service's CPU per record grew by ~40 % once the
// process had run a while (heap fragmentation; malloc/free were a fifth of the actor thread's
// samples), measured in BENCHMARKS.md's notes.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_new(cli.log_filter()).context("invalid --log / HISTORY_LOG filter")?,
        )
        .with_writer(std::io::stderr)
        .init();
    actix_web::rt::System::new().block_on(async move {
        match cli.command {
            Command::Run(args) => {
                let settings = Settings::from_run_args(*args)?;
                Application::build(settings)
                    .await?
                    .run_until_stopped()
                    .await?;
            }
            #[cfg(feature = "tools")]
            Command::Demo(args) => history_consumer::tools::demo::run(args).await?,
            #[cfg(feature = "tools")]
            Command::Bench(args) => history_consumer::tools::bench::run(args).await?,
            #[cfg(feature = "tools")]
            Command::Produce(args) => {
                history_consumer::tools::produce::run(args).await?;
            }
            Command::Migrate(args) => {
                let pool = history_consumer::db::pool(args.database_url.expose(), 1)?;
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
        Ok(())
    })
}
