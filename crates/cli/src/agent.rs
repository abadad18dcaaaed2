//! `tightlink agent`: the long-running service (targets on schedules,
//! SQLite history, Prometheus `/metrics` and `/probe`). Flags and
//! environment variables override the config file; the work is in
//! tightlink-agent.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use tightlink_agent::agent::unix_ns;
use tightlink_agent::config::{self, Overrides};
use tightlink_agent::history::utc_text;
use tightlink_agent::Agent;

#[derive(Args)]
pub struct AgentArgs {
    /// The TOML configuration (see `deploy/agent.toml`); without one and
    /// without --target the agent watches the embedded simulated path.
    #[arg(long, short, env = "TIGHTLINK_AGENT_CONFIG")]
    pub config: Option<PathBuf>,
    /// `ADDR:PORT` for /metrics and /probe, or `off` [default: 127.0.0.1:9447].
    #[arg(long, env = "TIGHTLINK_AGENT_LISTEN")]
    pub listen: Option<String>,
    /// The SQLite history [default: $STATE_DIRECTORY/history.db, else
    /// $XDG_STATE_HOME/tightlink/history.db, else ~/.local/state/tightlink/history.db].
    #[arg(long, env = "TIGHTLINK_AGENT_DATABASE")]
    pub database: Option<PathBuf>,
    /// Delete results older than this [default: 30d].
    #[arg(long, env = "TIGHTLINK_AGENT_RETENTION")]
    pub retention: Option<String>,
    /// Measure each target this often unless its config says [default: 5m].
    #[arg(long, env = "TIGHTLINK_AGENT_INTERVAL")]
    pub interval: Option<String>,
    /// Random share of the interval added or taken away, 0..0.5 [default: 0.1].
    #[arg(long, env = "TIGHTLINK_AGENT_JITTER")]
    pub jitter: Option<f64>,
    /// Give up on a measurement after this long [default: 60s].
    #[arg(long, env = "TIGHTLINK_AGENT_TIMEOUT")]
    pub timeout: Option<String>,
    /// Methods for targets that name none (comma-separated) [default: auto].
    #[arg(long, env = "TIGHTLINK_AGENT_METHODS", value_delimiter = ',')]
    pub methods: Option<Vec<String>>,
    /// Measurements at once over all targets (each target one at a
    /// time) [default: as many as targets, at most 32].
    #[arg(long, env = "TIGHTLINK_AGENT_WORKERS")]
    pub workers: Option<usize>,
    /// A target to watch besides the config's (repeat it; the
    /// environment variable takes a space-separated list).
    #[arg(
        long = "target",
        env = "TIGHTLINK_AGENT_TARGETS",
        value_delimiter = ' '
    )]
    pub targets: Vec<String>,
    /// `/probe` may also measure targets matching these patterns (`*`
    /// matches anything; space-separated in the environment variable).
    #[arg(long, env = "TIGHTLINK_AGENT_PROBE_ALLOW", value_delimiter = ' ')]
    pub probe_allow: Option<Vec<String>>,
    /// `/probe` measurements at once [default: 2].
    #[arg(long, env = "TIGHTLINK_AGENT_PROBE_MAX_CONCURRENT")]
    pub probe_max_concurrent: Option<usize>,
    /// `/probe` of one target at most this often [default: 10s].
    #[arg(long, env = "TIGHTLINK_AGENT_PROBE_MIN_INTERVAL")]
    pub probe_min_interval: Option<String>,
    /// Check the configuration, print what it resolves to and exit.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: AgentArgs) -> Result<()> {
    let over = Overrides {
        listen: args.listen,
        database: args.database,
        retention: args.retention,
        interval: args.interval,
        jitter: args.jitter,
        timeout: args.timeout,
        methods: args.methods,
        workers: args.workers,
        targets: args.targets,
        probe_allow: args.probe_allow,
        probe_max_concurrent: args.probe_max_concurrent,
        probe_min_interval: args.probe_min_interval,
    };
    let mut cfg = config::load(args.config.as_deref(), &over)?;
    if cfg.targets.is_empty() {
        // A fresh machine: watch the embedded simulated path.
        cfg = config::load(
            args.config.as_deref(),
            &Overrides {
                targets: vec!["sim:".into()],
                ..over
            },
        )?;
    }
    if args.check {
        println!(
            "listen     {}",
            cfg.listen.map_or("off".into(), |a| a.to_string())
        );
        println!("database   {}", cfg.database.display());
        println!("retention  {} s", cfg.retention_s);
        println!("workers    {}", cfg.workers);
        for t in &cfg.targets {
            let ms: Vec<&str> = t.methods.iter().map(|m| m.name()).collect();
            let capacity = t.capacity_bps.map_or(String::new(), |c| {
                format!(", capacity {}", tightlink_core::units::format_rate(c))
            });
            let when = match t.phase_s {
                Some(p) => format!("every {} s at +{p} s", t.interval_s),
                None => format!("every {} s +- {:.0} %", t.interval_s, t.jitter * 100.0),
            };
            println!(
                "target     {}  ({})  {}  {when}, timeout {} s{capacity}",
                t.name,
                t.target,
                ms.join(","),
                t.timeout_s
            );
        }
        println!(
            "probe      allow [{}], {} at once, each target at most every {} s",
            cfg.probe.allow.join(" "),
            cfg.probe.max_concurrent,
            cfg.probe.min_interval_s
        );
        return Ok(());
    }
    tightlink_agent::signal::catch_stop_signals()?;
    let log: Arc<dyn Fn(&str) + Send + Sync> =
        Arc::new(|m: &str| eprintln!("{} tightlink agent: {m}", utc_text(unix_ns())));
    let agent = Agent::new(cfg, log.clone())?;
    let summary = agent.run(&|| tightlink_agent::signal::stop_signals() > 0)?;
    log(&format!(
        "stopped: {} measurement(s) finished ({} failed), {} not stored",
        summary.finished, summary.failed, summary.store_errors
    ));
    Ok(())
}
