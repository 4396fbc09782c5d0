//! Kafka's named listeners: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map` and `inter.broker.listener.name`, resolved into the
//! list of sockets each shard binds and the endpoints the broker advertises.
//!
//! Syntax as Kafka's: `NAME://host:port` entries separated by commas; an empty host binds
//! every interface; a listener's security protocol is the map's entry for its name.
//! Without `listeners`, shardlog's `listen` address is the one PLAINTEXT listener.
use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// Kafka's `SecurityProtocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        })
    }
}

/// Kafka 4.4's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// The most listeners one broker may name (each is a socket per shard).
pub const MAX_LISTENERS: usize = 16;

/// One client listener, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The listener's name as configured, upper case (Kafka's `ListenerName`).
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Where every shard binds (SO_REUSEPORT).
    pub bind: SocketAddr,
    /// host and port clients are told (advertised.listeners, or the bind address).
    pub advertised_host: String,
    pub advertised_port: i32,
}

/// A listener's advertised endpoint as brokers register it (`BrokerMeta::listeners`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListenerEndpoint {
    pub name: String,
    pub host: String,
    pub port: i32,
}

/// The settings `resolve` reads (the config's keys, as strings).
pub struct ListenerSettings<'a> {
    /// shardlog's `listen` (used when `listeners` is empty).
    pub listen: SocketAddr,
    /// shardlog's `advertised_listener` (host:port for the `listen` listener).
    pub advertised_listener: Option<&'a str>,
    pub listeners: &'a str,
    pub advertised_listeners: &'a str,
    pub protocol_map: &'a str,
    pub inter_broker_listener_name: &'a str,
}

/// The broker's listeners in configured order, and which one other brokers use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listeners {
    pub all: Vec<Listener>,
    /// Index in `all` of the listener followers fetch from (inter.broker.listener.name).
    pub inter_broker: usize,
}

impl Listeners {
    pub fn endpoints(&self) -> Vec<ListenerEndpoint> {
        self.all.iter().map(|l| ListenerEndpoint { name: l.name.clone(), host: l.advertised_host.clone(), port: l.advertised_port }).collect()
    }

    pub fn inter_broker(&self) -> &Listener {
        &self.all[self.inter_broker]
    }
}

/// Resolves the listener settings; an error names the key and what is wrong.
pub fn resolve(s: &ListenerSettings<'_>) -> Result<Listeners, (&'static str, String)> {
    let map = parse_protocol_map(s.protocol_map).map_err(|m| ("listener_security_protocol_map", m))?;
    if s.listeners.trim().is_empty() {
        let (advertised_host, advertised_port) = match s.advertised_listener {
            Some(adv) => {
                let (h, p) = adv.rsplit_once(':').ok_or(("advertised_listener", format!("'{adv}' is not host:port")))?;
                let p = p.parse::<u16>().map_err(|_| ("advertised_listener", format!("'{adv}' has no valid port")))?;
                (h.trim_matches(['[', ']']).to_string(), i32::from(p))
            }
            None => (s.listen.ip().to_string(), i32::from(s.listen.port())),
        };
        let plain = Listener { name: "PLAINTEXT".into(), protocol: SecurityProtocol::Plaintext, bind: s.listen, advertised_host, advertised_port };
        if !s.advertised_listeners.trim().is_empty() {
            return Err(("advertised_listeners", "is set but `listeners` is not (name both, as Kafka)".into()));
        }
        return Ok(Listeners { all: vec![plain], inter_broker: 0 });
    }
    let entries = parse_entries(s.listeners).map_err(|m| ("listeners", m))?;
    let advertised =
        if s.advertised_listeners.trim().is_empty() { Vec::new() } else { parse_entries(s.advertised_listeners).map_err(|m| ("advertised_listeners", m))? };
    let mut all = Vec::with_capacity(entries.len());
    for (name, host, port) in entries {
        let protocol = match map.get(&name) {
            Some(p) => *p,
            None => return Err(("listener_security_protocol_map", format!("has no entry for listener {name} (add {name}:PLAINTEXT or another protocol)"))),
        };
        if port == 0 {
            return Err(("listeners", format!("{name}: port 0 is not a fixed port (every shard binds the same one)")));
        }
        let bind_host = if host.is_empty() { "0.0.0.0" } else { host.as_str() };
        let bind = (bind_host, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| ("listeners", format!("{name}: cannot resolve host '{host}'")))?;
        let (advertised_host, advertised_port) = match advertised.iter().find(|(n, _, _)| *n == name) {
            Some((_, h, p)) if !h.is_empty() => (h.clone(), i32::from(*p)),
            Some(_) => return Err(("advertised_listeners", format!("{name}: an advertised listener needs a host"))),
            None if host.is_empty() || bind.ip().is_unspecified() => {
                return Err(("advertised_listeners", format!("{name} binds every interface: name the host clients reach it at")))
            }
            None => (host.clone(), i32::from(port)),
        };
        all.push(Listener { name, protocol, bind, advertised_host, advertised_port });
    }
    if let Some((name, _, _)) = advertised.iter().find(|(n, _, _)| !all.iter().any(|l| l.name == *n)) {
        return Err(("advertised_listeners", format!("{name} is not in `listeners`")));
    }
    let inter_broker = if s.inter_broker_listener_name.trim().is_empty() {
        // Kafka's default security.inter.broker.protocol is PLAINTEXT: the listener of
        // that protocol (here the first one). A secured one is named explicitly.
        all.iter()
            .position(|l| l.protocol == SecurityProtocol::Plaintext)
            .ok_or(("inter_broker_listener_name", "no PLAINTEXT listener: name the listener other brokers fetch from".to_string()))?
    } else {
        let want = s.inter_broker_listener_name.trim().to_ascii_uppercase();
        all.iter().position(|l| l.name == want).ok_or_else(|| ("inter_broker_listener_name", format!("{want} is not in `listeners`")))?
    };
    Ok(Listeners { all, inter_broker })
}

/// `NAME:PROTOCOL,...`.
fn parse_protocol_map(s: &str) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    let mut map = BTreeMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, proto) = entry.split_once(':').ok_or_else(|| format!("'{entry}' is not NAME:PROTOCOL"))?;
        let name = listener_name(name)?;
        let proto = SecurityProtocol::parse(proto).ok_or_else(|| format!("'{proto}' is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"))?;
        if map.insert(name.clone(), proto).is_some() {
            return Err(format!("{name} is mapped twice"));
        }
    }
    Ok(map)
}

/// `NAME://host:port,...` into (NAME, host, port); host may be empty, IPv6 in brackets.
fn parse_entries(s: &str) -> Result<Vec<(String, String, u16)>, String> {
    let mut out: Vec<(String, String, u16)> = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, addr) = entry.split_once("://").ok_or_else(|| format!("'{entry}' is not NAME://host:port"))?;
        let name = listener_name(name)?;
        let (host, port) = addr.rsplit_once(':').ok_or_else(|| format!("'{entry}' has no port"))?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let port = port.parse::<u16>().map_err(|_| format!("'{entry}' has no valid port (0-65535)"))?;
        if out.iter().any(|(n, _, _)| *n == name) {
            return Err(format!("listener {name} is named twice"));
        }
        if out.len() == MAX_LISTENERS {
            return Err(format!("more than {MAX_LISTENERS} listeners"));
        }
        out.push((name, host.to_string(), port));
    }
    if out.is_empty() {
        return Err("names no listener".into());
    }
    Ok(out)
}

fn listener_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(format!("'{name}' is not a listener name (letters, digits, _ and -)"));
    }
    Ok(name.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings<'a>(listeners: &'a str, advertised: &'a str, inter: &'a str) -> ListenerSettings<'a> {
        ListenerSettings {
            listen: "127.0.0.1:9092".parse().unwrap(),
            advertised_listener: None,
            listeners,
            advertised_listeners: advertised,
            protocol_map: DEFAULT_PROTOCOL_MAP,
            inter_broker_listener_name: inter,
        }
    }

    #[test]
    fn without_listeners_the_listen_address_is_one_plaintext_listener() {
        let l = resolve(&settings("", "", "")).unwrap();
        assert_eq!(l.all.len(), 1);
        assert_eq!(l.all[0].name, "PLAINTEXT");
        assert_eq!(l.all[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!((l.all[0].advertised_host.as_str(), l.all[0].advertised_port), ("127.0.0.1", 9092));
        let mut s = settings("", "", "");
        s.advertised_listener = Some("broker1:19092");
        let l = resolve(&s).unwrap();
        assert_eq!((l.all[0].advertised_host.as_str(), l.all[0].advertised_port), ("broker1", 19092));
    }

    #[test]
    fn named_listeners_take_their_protocol_from_the_map_and_their_address_from_advertised() {
        let l = resolve(&settings("PLAINTEXT://127.0.0.1:9092,ssl://127.0.0.1:9093, INTERNAL://:9094", "INTERNAL://10.0.0.5:9094", "")).unwrap_err();
        assert_eq!(l.0, "listener_security_protocol_map", "INTERNAL has no protocol");
        let mut s = settings("PLAINTEXT://127.0.0.1:9092,ssl://127.0.0.1:9093,INTERNAL://:9094", "INTERNAL://10.0.0.5:9094", "internal");
        let map = format!("{DEFAULT_PROTOCOL_MAP},INTERNAL:PLAINTEXT");
        s.protocol_map = &map;
        let l = resolve(&s).unwrap();
        let names: Vec<_> = l.all.iter().map(|l| (l.name.as_str(), l.protocol)).collect();
        assert_eq!(names, vec![("PLAINTEXT", SecurityProtocol::Plaintext), ("SSL", SecurityProtocol::Ssl), ("INTERNAL", SecurityProtocol::Plaintext)]);
        assert_eq!(l.all[2].bind, "0.0.0.0:9094".parse::<SocketAddr>().unwrap());
        assert_eq!((l.all[2].advertised_host.as_str(), l.all[2].advertised_port), ("10.0.0.5", 9094));
        assert_eq!(l.inter_broker().name, "INTERNAL");
        assert_eq!(l.endpoints()[1], ListenerEndpoint { name: "SSL".into(), host: "127.0.0.1".into(), port: 9093 });
    }

    #[test]
    fn bad_listener_settings_name_the_key() {
        let cases = [
            ("PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093", "", "", "listeners"),
            ("PLAINTEXT//127.0.0.1:9092", "", "", "listeners"),
            ("PLAINTEXT://127.0.0.1:0", "", "", "listeners"),
            ("PLAINTEXT://127.0.0.1:99999", "", "", "listeners"),
            ("PLAINTEXT://:9092", "", "", "advertised_listeners"),
            ("PLAINTEXT://127.0.0.1:9092", "SSL://h:1", "", "advertised_listeners"),
            ("SSL://127.0.0.1:9093", "", "", "inter_broker_listener_name"),
            ("PLAINTEXT://127.0.0.1:9092", "", "OTHER", "inter_broker_listener_name"),
            ("B@D://127.0.0.1:9092", "", "", "listeners"),
        ];
        for (listeners, advertised, inter, key) in cases {
            let got = resolve(&settings(listeners, advertised, inter));
            assert_eq!(got.as_ref().map_err(|e| e.0), Err(key), "{listeners} / {advertised} / {inter}: {got:?}");
        }
        // A secured listener between brokers, when named.
        let l = resolve(&settings("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "", "SSL")).unwrap();
        assert_eq!(l.inter_broker().protocol, SecurityProtocol::Ssl);
        let mut s = settings("PLAINTEXT://127.0.0.1:9092", "", "");
        s.protocol_map = "PLAINTEXT:TLS";
        assert_eq!(resolve(&s).unwrap_err().0, "listener_security_protocol_map");
        let many: Vec<String> = (0..=MAX_LISTENERS).map(|i| format!("L{i}://127.0.0.1:{}", 9000 + i)).collect();
        assert_eq!(resolve(&settings(&many.join(","), "", "")).unwrap_err().0, "listeners");
    }
}
