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
mod flags;
mod generate;
mod history;
mod hops;
mod lab;
mod lab_run;
mod lab_target;
mod mesh;
mod out;
mod reflector;
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
    about = "Available bandwidth and capacity of network paths, measured without filling them.",
    after_help = EXAMPLES_TOP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Each command's examples (its --help ends with them; the guide's
// reference shows them, and a test runs every one).
const EXAMPLES_TOP: &str = "Examples:\n  tightlink estimate                                   # the available bandwidth of the embedded simulated path\n  tightlink estimate --help                            # a command's flags and examples\n  tightlink lab list                                   # the lab's scenarios (running one needs root)";
const EXAMPLES_ESTIMATE: &str = "Examples:\n  tightlink estimate                                   # the embedded simulated 10 Gbit/s path\n  tightlink estimate sim:cross=cbr:3G -m multirate --json\n  tightlink estimate sim: --follow --max-streams 20    # track the path (bart), a line per stream\n  tightlink estimate sim: --save-trace run.trace       # keep the streams; `estimate trace:run.trace` replays them";
const EXAMPLES_CAPACITY: &str = "Examples:\n  tightlink capacity                                   # Pathrate and CapProbe on the simulated narrow link\n  tightlink capacity --method capprobe --json";
const EXAMPLES_ANALYZE: &str = "Examples:\n  tightlink simulate -o run.trace --truth truth.csv    # streams to read, with their truth\n  tightlink analyze run.trace                          # the best method for each stream's kind\n  tightlink analyze run.trace -m all -f csv            # every method, one row each";
const EXAMPLES_ANALYZE_TCP: &str = "Examples:\n  sudo tightlink lab tcp quiet --keep-captures caps     # a CUBIC transfer through the lab, captured at the sender\n  sudo tightlink analyze-tcp caps/quiet-sender.pcap --plot flow.png   # (the lab's captures are root's)\n  sudo tightlink analyze-tcp caps/quiet-sender.pcap --flow 1 --format csv   # the largest flow, per ACK";
const EXAMPLES_SIMULATE: &str = "Examples:\n  tightlink simulate -o run.trace --truth truth.csv\n  tightlink simulate sim:cross=poisson:4G -o multi.trace.gz --kind multi --streams 50";
const EXAMPLES_SERVER: &str = "Examples:\n  tightlink server                                     # TCP 7447, open limits (1 Gbit/s, 50 MB, 30 s a session)\n  tightlink server --port 7460 --max-rate 5G --max-sessions 4";
const EXAMPLES_REFLECTOR: &str = "Examples:\n  tightlink reflector                                  # UDP 862 (root, or CAP_NET_BIND_SERVICE)\n  tightlink reflector --port 8620                      # an unprivileged port: `estimate twamp:HOST:8620`";
const EXAMPLES_AGENT: &str = "Examples:\n  tightlink agent                                      # the simulated path every 5 min, /metrics on 127.0.0.1:9447\n  tightlink agent --config deploy/agent.toml --check   # what a config resolves to, then exit";
const EXAMPLES_HISTORY: &str =
    "Examples:\n  tightlink history --since 1h\n  tightlink history --since 1d --format csv";
const EXAMPLES_LAB: &str = "Examples:\n  tightlink lab list                                   # the shipped scenarios\n  sudo tightlink lab run cbr30 --method auto --repeat 3";
const EXAMPLES_TRANSFER: &str = "Examples:\n  tightlink transfer --bytes 20MB                       # through the simulated path (30 ms RTT)\n  tightlink transfer --time 2s --json";
const EXAMPLES_HOPS: &str = "Examples:\n  tightlink hops                                       # the simulated four-link path, lone probes\n  tightlink hops --behind 16 --json                    # probes behind heads of 16 packets (token-bucket shapers)";
const EXAMPLES_DOCTOR: &str = "Examples:\n  tightlink doctor --quick                             # against a server it starts on loopback";
const EXAMPLES_EVAL: &str = "Examples:\n  tightlink eval --quick --plots plots                 # the tables and the paper's figures, under a minute on 2 cores";
const EXAMPLES_CAPTURE: &str = "Examples:\n  sudo tightlink capture -i lo -w lo.pcap --duration 1s    # then: tightlink analyze-tcp lo.pcap";
const EXAMPLES_CROSS: &str = "Examples:\n  tightlink cross 127.0.0.1:9 --traffic cbr:10M --duration 1s   # 10 Mbit/s of CBR to the discard port\n  tightlink cross 127.0.0.1:9 --traffic bursty:20M --duration 1s";

#[derive(Subcommand)]
enum Command {
    /// Estimate the available bandwidth of a path (by default the embedded
    /// simulated 10 Gbit/s path), next to the simulator's ground truth.
    #[command(after_help = EXAMPLES_ESTIMATE)]
    Estimate(estimate::EstimateArgs),
    /// Estimate the narrow link's capacity by Pathrate and CapProbe, side
    /// by side (by default on a simulated 10 Gbit/s narrow link behind
    /// 40 Gbit/s with 30 % cross traffic).
    #[command(after_help = EXAMPLES_CAPACITY)]
    Capacity(capacity::CapacityArgs),
    /// Each link's capacity by variable packet size (pathchar): TTL-limited
    /// UDP probes of several sizes and their ICMP errors (no root needed);
    /// `--behind N` to see token-bucket shapers.
    #[command(after_help = EXAMPLES_HOPS)]
    Hops(hops::HopsArgs),
    /// Analyze a recorded probe trace (format v1, plain or gzip): one
    /// decision or estimate per stream and method.
    #[command(after_help = EXAMPLES_ANALYZE)]
    Analyze(analyze::AnalyzeArgs),
    /// Passive estimators on a TCP flow from a pcap/pcapng capture taken
    /// at the sender: RTT, losses and their classes (congestion or
    /// random), Westwood BE/RE/ERE, bottleneck buffer, TCPProbe capacity.
    #[command(after_help = EXAMPLES_ANALYZE_TCP)]
    AnalyzeTcp(analyze_tcp::AnalyzeTcpArgs),
    /// Capture an interface into a pcap file (both directions, kernel
    /// nanosecond stamps) for analyze-tcp, without tcpdump (CAP_NET_RAW).
    #[command(after_help = EXAMPLES_CAPTURE)]
    Capture(capture::CaptureArgs),
    /// Send probe streams through a simulated path and write them as a
    /// probe trace, with the ground truth per stream in a separate CSV.
    #[command(after_help = EXAMPLES_SIMULATE)]
    Simulate(simulate::SimulateArgs),
    /// Reproduce the BASS paper's evaluation on the simulator: decision
    /// error vs stream length, multi-rate error distributions, Range
    /// sensitivity, closed-loop strategies, 10 and 100 Gbit/s.
    #[command(after_help = EXAMPLES_EVAL)]
    Eval(eval::EvalArgs),
    /// Serve as the far end of real measurements (TCP control port 7447,
    /// a UDP port per session); safe to expose (limits, timeouts, optional key).
    #[command(after_help = EXAMPLES_SERVER)]
    Server(server::ServerArgs),
    /// A TWAMP-light and STAMP reflector (RFC 5357, RFC 8762, UDP 862):
    /// any such sender, `estimate twamp:HOST` among them, can use this host
    /// as its far end; rate-limited per sender, short requests budgeted.
    #[command(after_help = EXAMPLES_REFLECTOR)]
    Reflector(reflector::ReflectorArgs),
    /// Is this host the bottleneck? Clock, pacing precision per packet
    /// size, receiver batching, offloads; prints the rate it can probe up to.
    #[command(after_help = EXAMPLES_DOCTOR)]
    Doctor(doctor::DoctorArgs),
    /// The namespace testbed: scenarios with a known bottleneck, cross
    /// traffic and kernel-counter truth; `lab run cbr30` measures every
    /// method there (root).
    #[command(after_help = EXAMPLES_LAB)]
    Lab(lab::LabArgs),
    /// Watch many paths as a service: targets on schedules, every result
    /// in a SQLite history, Prometheus /metrics and /probe (see
    /// `deploy/`).
    #[command(after_help = EXAMPLES_AGENT)]
    Agent(agent::AgentArgs),
    /// A mesh of sites measured pair by pair: the file every site shares,
    /// checked, and the schedule no two measurements overlap in.
    Mesh(mesh::MeshArgs),
    /// What the agent stored: table, JSON or CSV, or a plot over time.
    #[command(after_help = EXAMPLES_HISTORY)]
    History(history::HistoryArgs),
    /// A bulk transfer rate-controlled by the estimates (Rapid: the data
    /// are the probe streams), to a server over reliable UDP with the
    /// digest checked, or through the simulated path.
    #[command(after_help = EXAMPLES_TRANSFER)]
    Transfer(transfer::TransferArgs),
    /// Cross traffic on real sockets with the simulator's models (CBR,
    /// Poisson, bursty, smoothed), or `--sink` to count it.
    #[command(after_help = EXAMPLES_CROSS)]
    Cross(cross::CrossArgs),
    /// Shell completions, man pages and the Markdown reference, made from
    /// these very definitions (for packagers and the guide).
    #[command(
        after_help = "Examples:\n  tightlink generate completions bash > tightlink.bash\n  tightlink generate man man1/\n  tightlink generate reference > reference.md"
    )]
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
        Command::Mesh(args) => mesh::run(args),
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
        // 2 where the command line or its input was wrong, as for the
        // flags clap refuses; 1 where the measurement failed.
        let bad_input = tightlink_measure::kind_of(&e) == tightlink_measure::ErrorKind::BadInput;
        std::process::exit(if bad_input { 2 } else { 1 });
    }
}
