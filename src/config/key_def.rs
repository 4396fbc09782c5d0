//! The machinery behind the one config definition (`keys.rs`): `config_keys!` turns one
//! list of keys into the `Config` struct (TOML, serde), its `Default`, the `ConfigArgs`
//! flags of `shardlog serve` (clap, with help), the merge of flags over the profile, and
//! `KEYS`, the table tooling reads (DescribeConfigs metadata, `docs/configuration.md`).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::LazyLock;

use clap::builder::ValueParser;
use clap::{Arg, ArgAction, ArgMatches};

use super::{Config, FlushMode, StorageFault};

/// Kafka's DescribeConfigs `config_type` codes (a key's type as Kafka documents it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// One config key, as `config_keys!` defines it.
#[derive(Clone, Copy)]
pub struct KeyDef {
    /// The TOML key and `Config` field.
    pub name: &'static str,
    /// Apache Kafka's name of the setting, where Kafka has it.
    pub kafka: Option<&'static str>,
    /// Kafka's type of it, where DescribeConfigs needs one.
    pub kafka_type: Option<ConfigType>,
    /// Changeable at run time (a cluster-wide dynamic broker config, as in Kafka).
    pub dynamic: bool,
    /// The first line of the documentation: one sentence.
    pub help: &'static str,
    /// The documentation after the first line (`///` lines, each with its leading space).
    pub more: &'static [&'static str],
    /// The value's type as an operator reads it.
    pub type_name: fn() -> String,
    /// The value in `config`, as text (what DescribeConfigs reports; the default in docs).
    pub value: fn(&Config) -> String,
}

impl KeyDef {
    /// The whole documentation: the help line, then the rest, one paragraph per blank line.
    pub fn doc(&self) -> String {
        let mut out = self.help.to_string();
        for line in self.more {
            let line = line.strip_prefix(' ').unwrap_or(line);
            match (line.is_empty(), out.ends_with('\n')) {
                (true, _) => out.push_str("\n\n"),
                (false, true) => out.push_str(line),
                (false, false) => {
                    out.push(' ');
                    out.push_str(line);
                }
            }
        }
        out
    }

    /// The default, as text.
    pub fn default_text(&self) -> String {
        (self.value)(&Config::default())
    }

    /// The flag of `shardlog serve` that sets this key (its long name, without `--`).
    pub fn flag(&self) -> &'static str {
        static LONG: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
            let cmd = serve_command();
            cmd.get_arguments().filter_map(|a| Some((a.get_id().to_string(), a.get_long()?.to_string()))).collect()
        });
        let long: &'static [(String, String)] = &LONG;
        long.iter().find(|(id, _)| id == self.name).map(|(_, l)| l.as_str()).unwrap_or_default()
    }
}

/// The first doc line without its leading space (a const fn, so `KeyDef::help` can be).
pub const fn help_line(line: &'static str) -> &'static str {
    line.trim_ascii()
}

/// A `Config` field's type: how it is shown, rendered and read from a flag.
pub trait ConfigValue: Sized {
    /// What the flag parses into (`ConfigArgs` holds `Option<Flag>`: None = not given).
    type Flag: Clone + std::fmt::Debug + Send + Sync + 'static;
    fn type_name() -> String;
    fn render(&self) -> String;
    fn from_flag(flag: Self::Flag) -> Self;
    /// Sets the flag's value parser and action.
    fn flag_arg(arg: Arg) -> Arg;
    /// Takes the flag's value out of the matches, if the flag was given.
    fn flag_value(matches: &mut ArgMatches, id: &str) -> Option<Self::Flag>;
}

/// A one-value type: a flag `--key VALUE`, given once.
pub trait Scalar: ConfigValue<Flag = Self> + Clone + std::fmt::Debug + Send + Sync + 'static {
    fn parser() -> ValueParser;
}

macro_rules! scalar {
    ($($t:ty => $name:literal, |$v:ident| $render:expr;)*) => {$(
        impl ConfigValue for $t {
            type Flag = $t;
            fn type_name() -> String {
                $name.to_string()
            }
            fn render(&self) -> String {
                let $v = self;
                $render
            }
            fn from_flag(flag: $t) -> $t {
                flag
            }
            fn flag_arg(arg: Arg) -> Arg {
                arg.value_parser(<$t as Scalar>::parser()).action(ArgAction::Set)
            }
            fn flag_value(matches: &mut ArgMatches, id: &str) -> Option<$t> {
                matches.remove_one::<$t>(id)
            }
        }
        impl Scalar for $t {
            fn parser() -> ValueParser {
                clap::value_parser!($t).into()
            }
        }
    )*};
}

scalar! {
    bool => "bool", |v| v.to_string();
    i16 => "i16", |v| v.to_string();
    i32 => "i32", |v| v.to_string();
    i64 => "i64", |v| v.to_string();
    u32 => "u32", |v| v.to_string();
    u64 => "u64", |v| v.to_string();
    usize => "usize", |v| v.to_string();
    String => "string", |v| v.clone();
    PathBuf => "path", |v| v.display().to_string();
    SocketAddr => "ip:port", |v| v.to_string();
    FlushMode => "enum", |v| enum_name(*v);
    StorageFault => "enum", |v| enum_name(*v);
}

/// A value enum's name as flags and TOML spell it.
fn enum_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// An optional value: unset by default, set by `--key VALUE`.
impl<T: Scalar> ConfigValue for Option<T> {
    type Flag = T;
    fn type_name() -> String {
        format!("{} (optional)", T::type_name())
    }
    fn render(&self) -> String {
        self.as_ref().map(T::render).unwrap_or_default()
    }
    fn from_flag(flag: T) -> Self {
        Some(flag)
    }
    fn flag_arg(arg: Arg) -> Arg {
        T::flag_arg(arg)
    }
    fn flag_value(matches: &mut ArgMatches, id: &str) -> Option<T> {
        T::flag_value(matches, id)
    }
}

/// A list: a TOML array; the flag takes comma-separated values and may be repeated.
impl<T: Scalar> ConfigValue for Vec<T> {
    type Flag = Vec<T>;
    fn type_name() -> String {
        format!("list of {}s", T::type_name())
    }
    fn render(&self) -> String {
        self.iter().map(T::render).collect::<Vec<_>>().join(",")
    }
    fn from_flag(flag: Vec<T>) -> Self {
        flag
    }
    fn flag_arg(arg: Arg) -> Arg {
        arg.value_parser(T::parser()).action(ArgAction::Append).value_delimiter(',')
    }
    fn flag_value(matches: &mut ArgMatches, id: &str) -> Option<Vec<T>> {
        matches.remove_many::<T>(id).map(|v| v.collect())
    }
}

/// Applies a key's own changes to its flag (`flag = |arg| ...` in `config_keys!`).
pub fn adjust_flag(arg: Arg, adjust: impl FnOnce(Arg) -> Arg) -> Arg {
    adjust(arg)
}

/// (long flag, value name) of each key: `log_dirs` → (`log-dirs`, `LOG_DIRS`), as clap's
/// derive names them. Built once: clap's names are `&'static str`.
static FLAG_NAMES: LazyLock<Vec<(&'static str, String, String)>> =
    LazyLock::new(|| super::KEYS.iter().map(|k| (k.name, k.name.replace('_', "-"), k.name.to_ascii_uppercase())).collect());

/// The default (long flag, value name) of the key `name` (a key of `KEYS`).
pub fn flag_names(name: &str) -> (&'static str, &'static str) {
    let names: &'static [(&'static str, String, String)] = &FLAG_NAMES;
    match names.iter().find(|(n, ..)| *n == name) {
        Some((_, long, value)) => (long, value),
        None => unreachable!("{name} is not a config key"), // only called with KEYS' names
    }
}

/// Defines every config key once. Each entry:
///
/// ```text
/// /// One sentence: the flag's help and the docs' summary.
/// /// More lines: the long help and the docs' details.
/// static|dynamic field: Type = default [, kafka = "kafka.name" [as KafkaType]] [, flag = |arg| arg...];
/// ```
///
/// `dynamic` marks the keys that change at run time (Kafka's cluster-wide dynamic broker
/// configs); `flag` adjusts the clap argument (another long name, another delimiter).
macro_rules! config_keys {
    (@dynamic static) => { false };
    (@dynamic dynamic) => { true };
    (@some) => { None };
    (@some $e:expr) => { Some($e) };
    ($(
        #[doc = $help:literal]
        $(#[doc = $doc:literal])*
        $scope:ident $f:ident : $ty:ty = $default:expr
        $(, kafka = $kafka:literal $(as $kty:ident)?)?
        $(, flag = $flag:expr)?
        ;
    )*) => {
        /// The broker's configuration: defaults, then a TOML profile, then flags. Each
        /// field is one key of `config_keys!` in `config/keys.rs`.
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Config {$(
            #[doc = $help]
            $(#[doc = $doc])*
            $(#[doc = ""] #[doc = concat!(" Kafka: `", $kafka, "`.")])?
            pub $f: $ty,
        )*}

        impl Default for Config {
            fn default() -> Self {
                Config { $($f: $default,)* }
            }
        }

        /// Command-line overrides for `shardlog serve`: one flag per config key (None: not
        /// given), and the profile to load first.
        #[derive(Clone, Debug, Default)]
        pub struct ConfigArgs {
            /// TOML profile to load (e.g. tuning/latency.toml) before applying flags.
            pub config: Option<std::path::PathBuf>,
            $(
                #[doc = $help]
                pub $f: Option<<$ty as $crate::config::key_def::ConfigValue>::Flag>,
            )*
        }

        impl ConfigArgs {
            /// Sets every key whose flag was given.
            pub(crate) fn apply_flags(&self, c: &mut Config) {
                $(if let Some(v) = &self.$f {
                    c.$f = <$ty as $crate::config::key_def::ConfigValue>::from_flag(v.clone());
                })*
            }
        }

        impl clap::Args for ConfigArgs {
            fn augment_args(cmd: clap::Command) -> clap::Command {
                use $crate::config::key_def::{adjust_flag, flag_names, ConfigValue};
                let mut cmd = cmd.arg(
                    clap::Arg::new("config")
                        .long("config")
                        .value_name("CONFIG")
                        .value_parser(clap::value_parser!(std::path::PathBuf))
                        .help("TOML profile to load (e.g. tuning/latency.toml) before applying flags"),
                );
                $(
                    let def = &key::$f;
                    let (long, value_name) = flag_names(def.name);
                    let arg = clap::Arg::new(def.name)
                        .long(long)
                        .value_name(value_name)
                        .help(def.help)
                        .long_help($crate::config::key_def::long_help(def));
                    let arg = <$ty as ConfigValue>::flag_arg(arg);
                    $(let arg = adjust_flag(arg, $flag);)?
                    cmd = cmd.arg(arg);
                )*
                cmd
            }

            fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
                Self::augment_args(cmd)
            }
        }

        impl clap::FromArgMatches for ConfigArgs {
            fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
                Self::from_arg_matches_mut(&mut matches.clone())
            }

            fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
                let mut args = ConfigArgs::default();
                args.update_from_arg_matches_mut(matches)?;
                Ok(args)
            }

            fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
                self.update_from_arg_matches_mut(&mut matches.clone())
            }

            fn update_from_arg_matches_mut(&mut self, matches: &mut clap::ArgMatches) -> Result<(), clap::Error> {
                use $crate::config::key_def::ConfigValue;
                if let Some(path) = matches.remove_one::<std::path::PathBuf>("config") {
                    self.config = Some(path);
                }
                $(if let Some(v) = <$ty as ConfigValue>::flag_value(matches, stringify!($f)) {
                    self.$f = Some(v);
                })*
                Ok(())
            }
        }

        /// One `KeyDef` per key, named as the key (`key::log_segment_bytes`).
        #[allow(non_upper_case_globals)]
        pub mod key {
            use super::*;
            use $crate::config::key_def::{help_line, ConfigType, ConfigValue, KeyDef};
            $(
                #[doc = $help]
                pub const $f: KeyDef = KeyDef {
                    name: stringify!($f),
                    kafka: $crate::config::key_def::config_keys!(@some $($kafka)?),
                    kafka_type: $crate::config::key_def::config_keys!(@some $($(ConfigType::$kty)?)?),
                    dynamic: $crate::config::key_def::config_keys!(@dynamic $scope),
                    help: help_line($help),
                    more: &[$($doc),*],
                    type_name: <$ty as ConfigValue>::type_name,
                    value: |c: &Config| ConfigValue::render(&c.$f),
                };
            )*
        }

        /// Every config key, in definition order.
        pub const KEYS: &[$crate::config::key_def::KeyDef] = &[$(key::$f),*];
    };
}
pub(crate) use config_keys;

/// A flag's long help: the whole documentation, then the Kafka name and the default.
pub fn long_help(key: &KeyDef) -> String {
    let mut out = key.doc();
    let default = key.default_text();
    out.push_str("\n\n");
    if let Some(kafka) = key.kafka {
        out.push_str(&format!("Kafka: {kafka}{}. ", if key.dynamic { " (dynamic)" } else { "" }));
    }
    out.push_str(&format!("Default: {}.", if default.is_empty() { "empty" } else { &default }));
    out
}

/// The flag arguments of `shardlog serve`, as clap builds them.
pub fn serve_command() -> clap::Command {
    // As `shardlog serve -h` shows it (main.rs: each help on the line under its flag).
    <super::ConfigArgs as clap::Args>::augment_args(clap::Command::new("serve").next_line_help(true))
}

/// The configuration reference, `docs/configuration.md`: a table of every key, then the
/// longer documentation of the keys that have more than their help line.
pub fn reference_markdown() -> String {
    let cmd = serve_command();
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from src/config/keys.rs; do not edit. Regenerate with\n\
         \x20    SHARDLOG_WRITE_DOCS=1 cargo test --lib configuration_reference -->\n\n\
         `shardlog serve` takes each setting from its flag, else from the TOML profile named by\n\
         `--config` (`tuning/dev.toml`, `throughput.toml`, `latency.toml`), else from the default\n\
         below (Apache Kafka 4.1's where Kafka has the setting). Every key is both a TOML key\n\
         (`log_segment_bytes = 1048576`) and a flag (`--log-segment-bytes 1048576`); an unknown\n\
         key in a profile stops the broker at start. `shardlog serve -h` lists the flags with\n\
         the line below, `--help` with the details.\n\n\
         Dynamic keys can also change at run time, for one broker or cluster-wide, under their\n\
         Kafka name (IncrementalAlterConfigs, `kafka-configs.sh --alter --entity-type brokers`);\n\
         they are the defaults of topic keys. DescribeConfigs reports a broker's keys under their\n\
         Kafka names (`src/cluster/config_defs.rs`).\n\n\
         | key | flag | Kafka name | type | default | dynamic | meaning |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut details = String::new();
    for k in super::KEYS {
        let arg = cmd.get_arguments().find(|a| a.get_id() == k.name);
        let flag = format!("`--{}`", k.flag());
        let values: Vec<String> = arg.map(|a| a.get_possible_values().iter().map(|v| format!("`{}`", v.get_name())).collect()).unwrap_or_default();
        let ty = if values.is_empty() { (k.type_name)() } else { values.join(" or ") };
        let default = match k.default_text() {
            d if !d.is_empty() => format!("`{d}`"),
            _ if (k.type_name)().ends_with("(optional)") => "(unset)".to_string(),
            _ => "(empty)".to_string(),
        };
        let name = if k.more.is_empty() { format!("`{}`", k.name) } else { format!("[`{0}`](#{0})", k.name) };
        let kafka = k.kafka.map(|n| format!("`{n}`")).unwrap_or_default();
        let dynamic = if k.dynamic { "yes" } else { "no" };
        out.push_str(&format!("| {name} | {flag} | {kafka} | {} | {} | {dynamic} | {} |\n", cell(&ty), cell(&default), cell(k.help)));
        if !k.more.is_empty() {
            details.push_str(&format!("\n### `{}`\n\n{}\n", k.name, k.doc()));
        }
    }
    out.push_str("\n## Details\n");
    out.push_str(&details);
    out
}
