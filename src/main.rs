//! `shardlog`: the broker (`serve`) and its command-line tools.
use clap::{Parser, Subcommand};
use shardlog::cli::{cluster, decommission, group, topic, tune, txn};
use shardlog::config::ConfigArgs;

#[derive(Parser)]
#[command(name = "shardlog", version, about = "A Kafka-compatible, thread-per-core message broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker.
    // Each flag's help on the line under it: the longest flag would push every help
    // line past 120 columns.
    #[command(next_line_help = true)]
    Serve(Box<ConfigArgs>),
    /// Load generator: produce, consume or end-to-end against a running broker.
    Bench {
        #[command(subcommand)]
        mode: shardlog::bench::BenchMode,
    },
    /// Manage topics on a running broker.
    Topic {
        #[command(subcommand)]
        action: TopicAction,
    },
    /// The cluster as an operator reads it, from any broker.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Inspect consumer groups on a running broker.
    Group {
        #[command(subcommand)]
        action: GroupAction,
    },
    /// Inspect transactions and abort a hanging one.
    Txn {
        #[command(subcommand)]
        action: TxnAction,
    },
    /// What the broker needs of this host (as `rpk redpanda tune`): `--check` prints
    /// each check (kernel, io_uring, memlock, open files, O_DIRECT and filesystem of each log dir, I/O
    /// scheduler, aio-max-nr, transparent hugepages, CPU governor, IRQ affinity,
    /// swappiness, dirty writeback, clock source); `--apply NAME,...` changes only those.
    Tune(tune::TuneArgs),
    /// A live view of running brokers from their admin listeners' /metrics: per shard
    /// requests/s, MB/s in and out, p99 produce and fetch time, stalls; per cluster
    /// under-replicated and offline partitions, the active controller, the largest lags.
    Top {
        /// Admin listeners (host:port), one per node, comma-separated.
        #[arg(long, default_value = "127.0.0.1:9644", value_delimiter = ',')]
        admin: Vec<String>,
        /// Seconds between frames.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Frames to show, then exit (default: until interrupted).
        #[arg(long)]
        iterations: Option<u64>,
    },
}

#[derive(Subcommand)]
enum TxnAction {
    /// The transactions every broker coordinates, with their state.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// The producers of every partition of a topic, with their open transactions.
    Producers {
        topic: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Abort the transaction open at an offset of a partition (a hanging transaction).
    Abort {
        topic: String,
        #[arg(long)]
        partition: i32,
        #[arg(long)]
        start_offset: i64,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Brokers (fenced ones too) with their rack, roles, leaders and replicas; leader skew;
    /// under-replicated and offline partitions.
    Status {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// Any node's admin listener (host:port): adds leaders and replicas per shard (not
        /// in the Kafka protocol) and the shard leader skew.
        #[arg(long)]
        admin: Option<String>,
        /// `table` or `json`.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// Leader and replica skew, partitions not led by their preferred replica; `--apply`
    /// elects their preferred replicas (a preferred election).
    Balance {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// Run the preferred election and start the planned moves (nothing changes without it).
        #[arg(long)]
        apply: bool,
        /// Also plan up to this many replica moves that even out the replicas per broker.
        #[arg(long, default_value_t = 0)]
        moves: usize,
        /// `table` or `json`.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// The metadata quorum: leader, epoch, high watermark, each voter's and observer's lag.
    Quorum {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// `table` or `json`.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// Drains a broker: its leaderships first, then its replicas (reassigned to other
    /// brokers, rack-aware); unregisters it once it is empty and stopped.
    Decommission {
        /// The broker's node id.
        id: i32,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// Repeat until the broker is drained and unregistered (stop its process once it
        /// holds no replicas).
        #[arg(long)]
        wait: bool,
        /// Replica moves running at once.
        #[arg(long, default_value_t = 32)]
        max_moves: usize,
        /// With --wait: give up after this many seconds.
        #[arg(long, default_value_t = 3600)]
        timeout_s: u64,
        /// `table` or `json`.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// Cancels the replica moves a decommission started off this broker.
    Recommission {
        id: i32,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// `table` or `json`.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
}

#[derive(Subcommand)]
enum GroupAction {
    /// List groups with their state.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Members, assignments, committed offsets and lag of one group.
    Describe {
        name: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

#[derive(Subcommand)]
enum TopicAction {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Replicas of each partition (-1: the broker's default.replication.factor).
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        replication_factor: i16,
        /// Topic config, key=value (repeatable).
        #[arg(long = "config", value_parser = parse_kv)]
        configs: Vec<(String, String)>,
        /// Replicas of each partition by broker id, as kafka-topics.sh takes them:
        /// partitions separated by commas, their replicas by colons, the preferred leader
        /// first (`1:2:3,2:3:1`); not with --partitions or --replication-factor.
        #[arg(long, value_parser = topic::parse_replica_assignment, conflicts_with_all = ["partitions", "replication_factor"])]
        replica_assignment: Option<topic::ReplicaAssignment>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// List topics.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Describe one topic (or all).
    Describe {
        name: Option<String>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// A node's admin listener (host:port): adds the remote bytes and segments of a
        /// tiered topic's partitions (Kafka's protocol does not carry them).
        #[arg(long)]
        admin: Option<String>,
    },
    /// Delete a topic.
    Delete {
        name: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("expected key=value, got {s}"))
}

/// The broker's log on stderr: `log_format` text (ANSI colour only on a terminal, so a
/// log file holds no escape codes) or json (one object per line, with the thread name,
/// `shard-N` on a shard); a warning repeated from one call site is written once per
/// `repeated_warnings::WINDOW` with a count.
fn init_logging(config: &shardlog::config::Config) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{},openraft=warn", config.log_level)));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let json = config.log_format == "json";
    // Repeated warnings from one call site: once per window, then a count.
    let repeats = shardlog::metrics::repeated_warnings::RepeatedWarnings::new(json);
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry.with(lines.json().with_current_span(false).with_span_list(false).with_thread_names(true).with_filter(repeats)).init();
    } else {
        registry.with(lines.with_filter(repeats)).init();
    }
}

/// The report commands (`topic`, `cluster`, `group`, `tune`, ...) end quietly when their
/// reader goes away (`| head`), as Unix tools do: SIGPIPE back to its default. Rust
/// ignores it so writes fail with EPIPE, and `println!` then panics. Not for `serve` and
/// `bench`, whose sockets must see EPIPE as an error on one connection.
fn default_sigpipe() {
    // SAFETY: called first in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Bench { .. }) {
        default_sigpipe();
    }
    let result = match cli.command {
        Command::Serve(args) => args.resolve().map_err(anyhow::Error::from).and_then(|config| {
            init_logging(&config);
            if !shardlog::runtime::malloc_policy::bound_large_allocations() {
                tracing::warn!("mallopt(M_MMAP_THRESHOLD) refused: large freed buffers may stay resident");
            }
            shardlog::server::run_broker(config)
        }),
        Command::Bench { mode } => shardlog::bench::run(mode),
        Command::Topic { action } => match action {
            TopicAction::Create { name, partitions, replication_factor, configs, replica_assignment, bootstrap } => {
                topic::create(&bootstrap, &name, partitions, replication_factor, &configs, replica_assignment.as_ref().map(|a| a.0.as_slice()))
            }
            TopicAction::List { bootstrap } => topic::list(&bootstrap),
            TopicAction::Describe { name, bootstrap, admin } => topic::describe(&bootstrap, name.as_deref(), admin.as_deref()),
            TopicAction::Delete { name, bootstrap } => topic::delete(&bootstrap, &name),
        },
        Command::Cluster { action } => match action {
            ClusterAction::Status { bootstrap, admin, format } => cluster::status(&bootstrap, admin.as_deref(), format == "json"),
            ClusterAction::Quorum { bootstrap, format } => cluster::quorum(&bootstrap, format == "json"),
            ClusterAction::Balance { bootstrap, apply, moves, format } => cluster::balance(&bootstrap, apply, moves, format == "json"),
            ClusterAction::Decommission { id, bootstrap, wait, max_moves, timeout_s, format } => {
                decommission::decommission(&bootstrap, id, wait, max_moves, std::time::Duration::from_secs(timeout_s), format == "json")
            }
            ClusterAction::Recommission { id, bootstrap, format } => decommission::recommission(&bootstrap, id, format == "json"),
        },
        Command::Group { action } => match action {
            GroupAction::List { bootstrap } => group::list(&bootstrap),
            GroupAction::Describe { name, bootstrap } => group::describe(&bootstrap, &name),
        },
        Command::Txn { action } => match action {
            TxnAction::List { bootstrap } => txn::list(&bootstrap),
            TxnAction::Producers { topic, bootstrap } => txn::producers(&bootstrap, &topic),
            TxnAction::Abort { topic, partition, start_offset, bootstrap } => txn::abort(&bootstrap, &topic, partition, start_offset),
        },
        Command::Tune(args) => tune::run(args),
        Command::Top { admin, interval, iterations } => {
            shardlog::cli::top::run(&admin, std::time::Duration::from_secs_f64(interval.clamp(0.1, 3600.0)), iterations)
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
