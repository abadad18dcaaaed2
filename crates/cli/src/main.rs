//! `tightlink`: the command line. Thin: parsing flags, reading files and
//! printing reports; the work is in the library crates (core, trace, sim,
//! probe, net, eval).

mod agent;
mod analyze;
mod analyze_tcp;
mod capacity;
mod capture;
mod cross;
mod doctor;
mod estimate;
mod eval;
mod generate;
mod history;
mod hops;
mod lab;
mod reflector;
mod report;

mod server;
mod simulate;
mod transfer;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The version and the commit it was built from (`tightlink --version`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("TIGHTLINK_BUILT_FROM"));

#[derive(Parser)]
#[command(
    name = "tightlink",
    version = VERSION,
    about = "Available bandwidth and capacity of network paths, measured without filling them."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Estimate the available bandwidth of a path (by default the embedded
    /// simulated 10 Gbit/s path), next to the simulator's ground truth.
    Estimate(estimate::EstimateArgs),
    /// Estimate the narrow link's capacity by Pathrate and CapProbe, side
    /// by side (by default on a simulated 10 Gbit/s narrow link behind
    /// 40 Gbit/s with 30 % cross traffic).
    Capacity(capacity::CapacityArgs),
    /// Each link's capacity by variable packet size (pathchar): TTL-limited
    /// UDP probes of several sizes and their ICMP errors (no root needed);
    /// `--behind N` to see token-bucket shapers.
    Hops(hops::HopsArgs),
    /// Analyze a recorded probe trace (format v1, plain or gzip): one
    /// decision or estimate per stream and method.
    Analyze(analyze::AnalyzeArgs),
    /// Passive estimators on a TCP flow from a pcap/pcapng capture taken
    /// at the sender: RTT, losses and their classes (congestion or
    /// random), Westwood BE/RE/ERE, bottleneck buffer, TCPProbe capacity.
    AnalyzeTcp(analyze_tcp::AnalyzeTcpArgs),
    /// Capture an interface into a pcap file (both directions, kernel
    /// nanosecond stamps) for analyze-tcp, without tcpdump (CAP_NET_RAW).
    Capture(capture::CaptureArgs),
    /// Send probe streams through a simulated path and write them as a
    /// probe trace, with the ground truth per stream in a separate CSV.
    Simulate(simulate::SimulateArgs),
    /// Reproduce the BASS paper's evaluation on the simulator: decision
    /// error vs stream length, multi-rate error distributions, Range
    /// sensitivity, closed-loop strategies, 10 and 100 Gbit/s.
    Eval(eval::EvalArgs),
    /// Serve as the far end of real measurements (TCP control port 7447,
    /// a UDP port per session); safe to expose (limits, timeouts, optional key).
    Server(server::ServerArgs),
    /// A TWAMP-light and STAMP reflector (RFC 5357, RFC 8762, UDP 862):
    /// any such sender, `estimate twamp:HOST` among them, can use this host
    /// as its far end; rate-limited per sender, short requests budgeted.
    Reflector(reflector::ReflectorArgs),
    /// Is this host the bottleneck? Clock, pacing precision per packet
    /// size, receiver batching, offloads; prints the rate it can probe up to.
    Doctor(doctor::DoctorArgs),
    /// The namespace testbed: scenarios with a known bottleneck, cross
    /// traffic and kernel-counter truth; `lab run cbr30` measures every
    /// method there (root).
    Lab(lab::LabArgs),
    /// Watch many paths as a service: targets on schedules, every result
    /// in a SQLite history, Prometheus /metrics and /probe (see
    /// `deploy/`).
    Agent(agent::AgentArgs),
    /// What the agent stored: table, JSON or CSV, or a plot over time.
    History(history::HistoryArgs),
    /// A bulk transfer rate-controlled by the estimates (Rapid: the data
    /// are the probe streams), to a server over reliable UDP with the
    /// digest checked, or through the simulated path.
    Transfer(transfer::TransferArgs),
    /// Cross traffic on real sockets with the simulator's models (CBR,
    /// Poisson, bursty, smoothed), or `--sink` to count it.
    Cross(cross::CrossArgs),
    /// Shell completions, man pages and the Markdown reference, made from
    /// these very definitions (for packagers and the guide).
    Generate(generate::GenerateArgs),
}

fn main() {
    // Output piped into `head` and the like: end quietly when the reader
    // goes away (Rust ignores SIGPIPE, so println! would panic instead).
    // SAFETY: setting a signal's disposition to default before any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which of a subcommand's flags the user typed (not defaults).
    let typed = |sub: &str, id: &str| {
        matches
            .subcommand_matches(sub)
            .is_some_and(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
    };
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::AnalyzeTcp(args) => analyze_tcp::run(args),
        Command::Capture(args) => capture::run(args),
        Command::Estimate(args) => estimate::run(args),
        Command::Transfer(args) => transfer::run(args),
        Command::Capacity(args) => capacity::run(args),
        Command::Hops(args) => hops::run(args),
        Command::Simulate(args) => simulate::run(args, &|id| typed("simulate", id)),
        Command::Eval(args) => eval::run(args),
        Command::Server(args) => server::run(args),
        Command::Reflector(args) => reflector::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Cross(args) => cross::run(args),
        Command::Agent(args) => agent::run(args),
        Command::History(args) => history::run(args),
        Command::Generate(args) => generate::run(args, Cli::command()),
    };
    if let Err(e) = result {
        // A reader that went away (`| head`) is not an error of ours.
        let broken_pipe = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            std::process::exit(0);
        }
        eprintln!("tightlink: error: {e:#}");
        std::process::exit(1);
    }
}
