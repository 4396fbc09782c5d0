//! One line of Kafka's `sasl.jaas.config`: `<LoginModule> <flag> key="value" ...;`. The
//! server side reads PLAIN's `user_<name>` options from it (`sasl_plain.rs`); a broker
//! reads its own `username` / `password` from it when it authenticates to a peer.
use std::collections::BTreeMap;

/// A parsed JAAS line: the login module and its options.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasLine {
    pub login_module: String,
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for JaasLine {
    // Option values are passwords: never in a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasLine").field("login_module", &self.login_module).field("options", &self.options.keys().collect::<Vec<_>>()).finish()
    }
}

/// Parses one JAAS line; `login_modules` are the modules accepted.
pub fn parse(jaas: &str, login_modules: &[&str]) -> Result<JaasLine, String> {
    let text = jaas.trim();
    let module_end = text.find(char::is_whitespace).unwrap_or(text.len());
    let (module, rest) = text.split_at(module_end);
    if !login_modules.contains(&module) {
        return Err(format!("must start with {} (the login module{} served here)", login_modules.join(" or "), if login_modules.len() > 1 { "s" } else { "" }));
    }
    let rest = rest.trim_start();
    let flag_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (flag, mut rest) = rest.split_at(flag_end);
    if !matches!(flag.trim_end_matches(';'), "required" | "requisite" | "sufficient" | "optional") {
        return Err(format!("'{flag}' is not a JAAS control flag (required)"));
    }
    let mut options = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest == ";" {
            break;
        }
        let eq = rest.find('=').ok_or_else(|| format!("expected key=\"value\" at '{}'", head(rest)))?;
        let key = rest[..eq].trim();
        let (value, after) = quoted(&rest[eq + 1..]).ok_or_else(|| format!("the value of {key} must be a quoted string"))?;
        options.insert(key.to_string(), value);
        rest = after;
    }
    Ok(JaasLine { login_module: module.to_string(), options })
}

impl JaasLine {
    /// The `username` and `password` options: this broker's own credentials as a client.
    pub fn client_credentials(&self) -> Option<(&str, &str)> {
        Some((self.options.get("username")?.as_str(), self.options.get("password")?.as_str()))
    }
}

/// A JAAS quoted string at the start of `s` (after spaces), with `\"` and `\\` escapes:
/// the value and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start().strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => out.push(chars.next()?.1),
            c => out.push(c),
        }
    }
    None
}

fn head(s: &str) -> &str {
    &s[..s.char_indices().nth(24).map_or(s.len(), |(i, _)| i)]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

    #[test]
    fn a_scram_line_gives_the_brokers_credentials() {
        let line = parse(&format!(r#"{SCRAM} required username="broker" password="p\"w";"#), &[SCRAM]).unwrap();
        assert_eq!(line.client_credentials(), Some(("broker", "p\"w")));
        assert!(!format!("{line:?}").contains("p\\\"w"), "no password in debug output");
        assert_eq!(parse(&format!("{SCRAM} required;"), &[SCRAM]).unwrap().client_credentials(), None);
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in
            ["", "other.Module required;", &format!("{SCRAM} maybe;"), &format!("{SCRAM} required username=broker;"), &format!("{SCRAM} required username=\"x")]
        {
            assert!(parse(bad, &[SCRAM]).is_err(), "{bad}");
        }
    }
}
