//! The remote store's settings, from the broker config (`rsm.config.*`, the Aiven S3
//! plugin's names) and the environment, checked once at start: a broker with tiered
//! storage on and no usable store refuses to start, saying which setting is missing.
use std::path::Path;
use std::time::Duration;

use crate::config::Config;

#[derive(Clone, PartialEq, Eq)]
pub struct RemoteStoreSettings {
    pub bucket: String,
    pub region: String,
    /// Empty: AWS's endpoint of the region.
    pub endpoint: String,
    /// Path-style requests (`endpoint/bucket/key`) rather than virtual-hosted ones.
    pub path_style: bool,
    /// Static credentials; None: the environment's (AWS_ACCESS_KEY_ID, ..., as the AWS
    /// SDKs read them).
    pub credentials: Option<(String, String)>,
    pub key_prefix: String,
    /// Longest wait for one store call, its retries included.
    pub call_timeout: Duration,
    /// remote.log.index.file.cache.total.size.bytes: decoded `.indexes` kept in memory.
    pub index_cache_bytes: usize,
    /// remote.log.reader.threads: remote reads in flight at once.
    pub reader_concurrency: usize,
    /// rsm.config.fetch.chunk.cache.size: remote `.log` bytes kept in memory (0: none).
    pub chunk_cache_bytes: usize,
    /// rsm.config.fetch.chunk.cache.prefetch.max.size: bytes read ahead of each read.
    pub chunk_prefetch_bytes: u64,
}

impl std::fmt::Debug for RemoteStoreSettings {
    // Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStoreSettings")
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("path_style", &self.path_style)
            .field("access_key_id", &self.credentials.as_ref().map(|c| c.0.as_str()))
            .field("key_prefix", &self.key_prefix)
            .finish()
    }
}

impl RemoteStoreSettings {
    /// The settings of `config`; None when tiered storage is off.
    pub fn from_config(config: &Config) -> Result<Option<RemoteStoreSettings>, String> {
        if !config.remote_log_storage_system_enable {
            return Ok(None);
        }
        if config.rsm_config_storage_s3_bucket_name.is_empty() {
            return Err("remote.log.storage.system.enable is true but rsm.config.storage.s3.bucket.name is not set: name the bucket of the remote store".into());
        }
        if config.rsm_config_storage_s3_region.is_empty() {
            return Err("rsm.config.storage.s3.region is empty: name the bucket's region".into());
        }
        let endpoint = config.rsm_config_storage_s3_endpoint_url.trim().to_string();
        if !(endpoint.is_empty() || endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(format!("rsm.config.storage.s3.endpoint.url {endpoint:?} is not an http:// or https:// URL"));
        }
        let path_style = match config.rsm_config_storage_s3_path_style_access_enabled.trim() {
            "" => !endpoint.is_empty(),
            v if v.eq_ignore_ascii_case("true") => true,
            v if v.eq_ignore_ascii_case("false") => false,
            v => return Err(format!("rsm.config.storage.s3.path.style.access.enabled is {v:?}: true, false or empty")),
        };
        let (id, secret) = (&config.rsm_config_storage_aws_access_key_id, &config.rsm_config_storage_aws_secret_access_key);
        let credentials = match (id.is_empty(), secret.is_empty()) {
            (false, false) => Some((id.clone(), secret.clone())),
            (true, true) if !config.rsm_config_storage_aws_credentials_file.is_empty() => {
                let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
                Some(read_credentials_file(Path::new(&config.rsm_config_storage_aws_credentials_file), &profile)?)
            }
            (true, true) => None,
            _ => return Err("aws.access.key.id and aws.secret.access.key must be defined together".into()),
        };
        Ok(Some(RemoteStoreSettings {
            bucket: config.rsm_config_storage_s3_bucket_name.clone(),
            region: config.rsm_config_storage_s3_region.clone(),
            endpoint,
            path_style,
            credentials,
            key_prefix: config.rsm_config_key_prefix.clone(),
            call_timeout: Duration::from_millis(config.rsm_config_storage_s3_api_call_timeout.max(1)),
            index_cache_bytes: usize::try_from(config.remote_log_index_file_cache_total_size_bytes).unwrap_or(usize::MAX),
            reader_concurrency: config.remote_log_reader_threads.max(1) as usize,
            chunk_cache_bytes: usize::try_from(config.rsm_config_fetch_chunk_cache_size).unwrap_or(usize::MAX),
            chunk_prefetch_bytes: config.rsm_config_fetch_chunk_cache_prefetch_max_size,
        }))
    }
}

/// The keys of `profile` in an AWS shared credentials file (INI: `[profile]`, then
/// `aws_access_key_id = ...` and `aws_secret_access_key = ...`). Read once, at start.
fn read_credentials_file(path: &Path, profile: &str) -> Result<(String, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("rsm.config.storage.aws.credentials.file {}: {e}", path.display()))?;
    parse_credentials(&text, profile).ok_or_else(|| {
        format!("rsm.config.storage.aws.credentials.file {}: no [{profile}] section with aws_access_key_id and aws_secret_access_key", path.display())
    })
}

fn parse_credentials(text: &str, profile: &str) -> Option<(String, String)> {
    let (mut section, mut id, mut secret) = (String::new(), None, None);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';')) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        let Some((k, v)) = line.split_once('=') else { continue };
        if section == profile {
            match k.trim() {
                "aws_access_key_id" => id = Some(v.trim().to_string()),
                "aws_secret_access_key" => secret = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    Some((id?, secret?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut c = Config { remote_log_storage_system_enable: true, rsm_config_storage_s3_bucket_name: "b".into(), ..Config::default() };
        for (k, v) in pairs {
            match *k {
                "endpoint" => c.rsm_config_storage_s3_endpoint_url = v.to_string(),
                "path_style" => c.rsm_config_storage_s3_path_style_access_enabled = v.to_string(),
                "id" => c.rsm_config_storage_aws_access_key_id = v.to_string(),
                "secret" => c.rsm_config_storage_aws_secret_access_key = v.to_string(),
                "bucket" => c.rsm_config_storage_s3_bucket_name = v.to_string(),
                _ => unreachable!("{k}"),
            }
        }
        c
    }

    #[test]
    fn off_unless_the_system_switch_is_on_and_the_bucket_named() {
        assert_eq!(RemoteStoreSettings::from_config(&Config::default()), Ok(None));
        assert!(RemoteStoreSettings::from_config(&config(&[("bucket", "")])).unwrap_err().contains("bucket.name is not set"));
        let s = RemoteStoreSettings::from_config(&config(&[])).unwrap().unwrap();
        assert_eq!((s.region.as_str(), s.path_style, s.credentials), ("us-east-1", false, None));
    }

    #[test]
    fn an_endpoint_means_path_style_unless_told_otherwise() {
        let s = RemoteStoreSettings::from_config(&config(&[("endpoint", "http://127.0.0.1:8333")])).unwrap().unwrap();
        assert!(s.path_style);
        let s = RemoteStoreSettings::from_config(&config(&[("endpoint", "https://s3.example"), ("path_style", "false")])).unwrap().unwrap();
        assert!(!s.path_style);
        assert!(RemoteStoreSettings::from_config(&config(&[("endpoint", "s3.example")])).is_err());
        assert!(RemoteStoreSettings::from_config(&config(&[("path_style", "yes")])).is_err());
    }

    #[test]
    fn credentials_come_in_pairs_and_never_print() {
        assert!(RemoteStoreSettings::from_config(&config(&[("id", "a")])).unwrap_err().contains("defined together"));
        let s = RemoteStoreSettings::from_config(&config(&[("id", "a"), ("secret", "s3cr3t")])).unwrap().unwrap();
        assert_eq!(s.credentials, Some(("a".into(), "s3cr3t".into())));
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }

    #[test]
    fn reads_the_profile_of_a_shared_credentials_file() {
        let text = "[other]\naws_access_key_id = x\naws_secret_access_key = y\n\n# comment\n[default]\naws_access_key_id=id1\naws_secret_access_key = sec1\nregion = eu\n";
        assert_eq!(parse_credentials(text, "default"), Some(("id1".into(), "sec1".into())));
        assert_eq!(parse_credentials(text, "other"), Some(("x".into(), "y".into())));
        assert_eq!(parse_credentials(text, "missing"), None);
    }
}
