//! Kafka's `controller.listener.names`: the listeners of `listeners` (and
//! `advertised.listeners`) that carry the controller's traffic. They are taken out of the
//! client listeners and become `controller_listener` / `advertised_controller_listener`
//! (the first name; Kafka uses the first for its own connections too), so a Kafka
//! `server.properties` listing `CONTROLLER://host:9093` works unchanged. Its protocol
//! (PLAINTEXT, or SSL with client certificates) is resolved in `peer_security.rs`.
use super::Config;

/// `NAME://host:port` entries of a listeners string, as (name upper-cased, address).
fn entries(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once("://") {
            Some((n, a)) => (n.trim().to_ascii_uppercase(), a.trim().to_string()),
            None => (String::new(), e.to_string()),
        })
        .collect()
}

/// The entries not named in `names`, joined again.
fn without(s: &str, names: &[String]) -> String {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .filter(|e| !e.split_once("://").is_some_and(|(n, _)| names.contains(&n.trim().to_ascii_uppercase())))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn apply(config: &mut Config) -> Result<(), String> {
    let names: Vec<String> = config.controller_listener_names.split(',').map(|n| n.trim().to_ascii_uppercase()).filter(|n| !n.is_empty()).collect();
    let Some(first) = names.first() else { return Ok(()) };
    let bound = entries(&config.listeners).into_iter().find(|(n, _)| n == first).map(|(_, a)| a);
    let advertised = entries(&config.advertised_listeners).into_iter().find(|(n, _)| n == first).map(|(_, a)| a);
    if let Some(address) = bound {
        match &config.controller_listener {
            Some(set) if *set != address => {
                return Err(format!("controller_listener {set} and the {first} listener {address} disagree: name it once"));
            }
            _ => config.controller_listener = Some(address),
        }
        config.listeners = without(&config.listeners, &names);
    }
    if let Some(address) = advertised {
        if config.advertised_controller_listener.is_none() {
            config.advertised_controller_listener = Some(address);
        }
        config.advertised_listeners = without(&config.advertised_listeners, &names);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(listeners: &str, advertised: &str, map: &str) -> Config {
        Config {
            listeners: listeners.into(),
            advertised_listeners: advertised.into(),
            listener_security_protocol_map: map.into(),
            controller_listener_names: "CONTROLLER".into(),
            ..Config::default()
        }
    }

    #[test]
    fn the_controller_listener_leaves_the_client_listeners() {
        let mut c = config(
            "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "PLAINTEXT://kafka-1:9092,CONTROLLER://kafka-1:9093",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        );
        apply(&mut c).unwrap();
        assert_eq!(c.listeners, "PLAINTEXT://127.0.0.1:9092");
        assert_eq!(c.advertised_listeners, "PLAINTEXT://kafka-1:9092");
        assert_eq!(c.controller_listener.as_deref(), Some("127.0.0.1:9093"));
        assert_eq!(c.advertised_controller_listener.as_deref(), Some("kafka-1:9093"));
        // Applied twice (a profile, then flags): nothing changes.
        let before = c.clone();
        apply(&mut c).unwrap();
        assert_eq!(c, before);
    }

    #[test]
    fn a_contradicting_controller_listener_is_refused() {
        let mut c = config("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
        c.controller_listener = Some("127.0.0.1:9999".into());
        assert!(apply(&mut c).unwrap_err().contains("disagree"));
        let mut c = config("PLAINTEXT://127.0.0.1:9092", "", "PLAINTEXT:PLAINTEXT");
        c.controller_listener_names = String::new();
        apply(&mut c).unwrap();
        assert_eq!(c.controller_listener, None);
    }
}
