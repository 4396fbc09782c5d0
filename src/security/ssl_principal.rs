//! The principal of a client that authenticated with a certificate (mutual TLS on an SSL
//! listener), as Kafka builds it: the certificate's subject as an RFC 2253 distinguished
//! name (Java's `X500Principal.getName()`: the last RDN first, `CN=...,OU=...,O=...`),
//! passed through `ssl.principal.mapping.rules`, then `User:<name>`.
//!
//! Rules, as Kafka's SslPrincipalMapper reads them: a comma-separated list of
//! `RULE:<regex>/<replacement>/[L|U]` (the first whose regex matches the whole name
//! applies; `$1` refers to a group; L/U lower or upper case the result) and `DEFAULT`
//! (the name unchanged). No rule matching: the name unchanged. The certificate is parsed
//! with the `x509-parser` crate.
use regex::Regex;
use x509_parser::prelude::{FromDer, X509Certificate};

#[derive(Debug)]
enum Rule {
    Default,
    Replace { pattern: Regex, replacement: String, case: Option<Case> },
}

#[derive(Debug, Clone, Copy)]
enum Case {
    Lower,
    Upper,
}

/// `ssl.principal.mapping.rules`, parsed.
#[derive(Debug)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

impl SslPrincipalMapper {
    pub fn parse(rules: &str) -> Result<SslPrincipalMapper, String> {
        let mut parsed = Vec::new();
        let mut rest = rules.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                parsed.push(Rule::Default);
                rest = after.trim_start().trim_start_matches(',').trim_start();
                continue;
            }
            let Some(body) = rest.strip_prefix("RULE:") else {
                return Err(format!("expected DEFAULT or RULE:<regex>/<replacement>/[LU] at '{rest}'"));
            };
            // pattern/replacement/flags: the pattern and replacement hold no unescaped '/'.
            let (pattern, after) = split_unescaped(body).ok_or_else(|| format!("rule '{body}' has no replacement"))?;
            let (replacement, after) = split_unescaped(after).ok_or_else(|| format!("rule '{body}' does not end with '/'"))?;
            let (case, after) = match after.chars().next() {
                Some('L') => (Some(Case::Lower), &after[1..]),
                Some('U') => (Some(Case::Upper), &after[1..]),
                _ => (None, after),
            };
            let pattern = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("rule pattern '{pattern}': {e}"))?;
            parsed.push(Rule::Replace { pattern, replacement: replacement.to_string(), case });
            rest = after.trim_start();
            if !rest.is_empty() {
                rest = rest.strip_prefix(',').ok_or_else(|| format!("expected ',' between rules at '{rest}'"))?.trim_start();
            }
        }
        Ok(SslPrincipalMapper { rules: parsed })
    }

    /// The name a distinguished name maps to.
    pub fn map(&self, dn: &str) -> String {
        for rule in &self.rules {
            match rule {
                Rule::Default => return dn.to_string(),
                Rule::Replace { pattern, replacement, case } => {
                    if !pattern.is_match(dn) {
                        continue;
                    }
                    let name = pattern.replace(dn, replacement.as_str()).into_owned();
                    return match case {
                        Some(Case::Lower) => name.to_lowercase(),
                        Some(Case::Upper) => name.to_uppercase(),
                        None => name,
                    };
                }
            }
        }
        dn.to_string()
    }

    /// `User:<mapped subject>` of a DER certificate.
    pub fn principal_of(&self, der: &[u8]) -> Result<String, String> {
        Ok(format!("User:{}", self.map(&subject_rfc2253(der)?)))
    }
}

/// Splits at the first '/' not escaped by a backslash.
fn split_unescaped(s: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '/' if !escaped => return Some((&s[..i], &s[i + 1..])),
            _ => escaped = false,
        }
    }
    None
}

/// A certificate's subject as Java's RFC 2253 string: RDNs last first, attributes of one
/// RDN joined by '+', keywords for the types RFC 2253 names (others as dotted OIDs).
pub fn subject_rfc2253(der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("client certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let oid = atv.attr_type().to_id_string();
                    let key = match oid.as_str() {
                        "2.5.4.3" => "CN".to_string(),
                        "2.5.4.6" => "C".to_string(),
                        "2.5.4.7" => "L".to_string(),
                        "2.5.4.8" => "ST".to_string(),
                        "2.5.4.10" => "O".to_string(),
                        "2.5.4.11" => "OU".to_string(),
                        "2.5.4.9" => "STREET".to_string(),
                        "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                        "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                        _ => oid,
                    };
                    let value = atv.as_str().map(escape).unwrap_or_else(|_| format!("#{}", hex(atv.attr_value().data)));
                    format!("{key}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// RFC 2253 escaping: `,+"\<>;` anywhere, '#' or ' ' first, ' ' last.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') || (i == 0 && matches!(c, '#' | ' ')) || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_rules_map_as_kafka_does() {
        let dn = "O=shardlog,OU=tests,CN=shardlog-client";
        assert_eq!(SslPrincipalMapper::parse("DEFAULT").unwrap().map(dn), dn);
        let m = SslPrincipalMapper::parse("RULE:^.*CN=([a-z-]+)$/$1/U, DEFAULT").unwrap();
        assert_eq!(m.map(dn), "SHARDLOG-CLIENT");
        assert_eq!(m.map("CN=other,O=x"), "CN=other,O=x", "no match: the next rule, DEFAULT");
        let lower = SslPrincipalMapper::parse("RULE:^O=([^,]*),.*$/$1@org/L").unwrap();
        assert_eq!(lower.map("O=ShardLog,CN=a"), "shardlog@org");
        assert!(SslPrincipalMapper::parse("RULE:(/x/").is_err());
        assert!(SslPrincipalMapper::parse("NONSENSE").is_err());
        assert!(SslPrincipalMapper::parse("RULE:a/b").is_err());
    }

    #[test]
    fn values_are_escaped() {
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" lead"), "\\ lead");
        assert_eq!(escape("#x"), "\\#x");
    }
}
