//! placeholder: helper S's implementation replaces this at merge.
//!
//! The high-watermark checkpoint of one partition directory: `load(dir)` and a save job,
//! the signatures the partition layer is written against. This stand-in keeps the value
//! in a checked file (magic, version, CRC-32C) so the partition's tests run before the
//! merge.
use std::future::Future;
use std::path::Path;

use super::dma::{read_checked_file, write_checked_file};
use super::StorageError;

/// placeholder: helper S's implementation replaces this at merge.
pub const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "high-watermark-checkpoint";
const MAGIC: u32 = 0x534c_4857; // "SLHW"
const VERSION: u16 = 1;

/// placeholder: helper S's implementation replaces this at merge.
/// The saved high watermark of the partition in `dir`; None if never saved.
pub async fn load(dir: &Path) -> Result<Option<i64>, StorageError> {
    let path = dir.join(HIGH_WATERMARK_CHECKPOINT_FILE);
    let Some(payload) = read_checked_file(&path, MAGIC, VERSION).await? else { return Ok(None) };
    let bytes: [u8; 8] = payload.as_slice().try_into().map_err(|_| StorageError::Corrupt {
        what: path.display().to_string(),
        detail: format!("{} bytes, not 8", payload.len()),
    })?;
    Ok(Some(i64::from_be_bytes(bytes)))
}

/// placeholder: helper S's implementation replaces this at merge.
/// Saves `high_watermark` for the partition in `dir` (atomically); a future that does not
/// borrow the caller.
pub fn save_job(dir: &Path, high_watermark: i64) -> impl Future<Output = Result<(), StorageError>> + 'static {
    let path = dir.join(HIGH_WATERMARK_CHECKPOINT_FILE);
    async move { write_checked_file(&path, MAGIC, VERSION, &high_watermark.to_be_bytes()).await }
}
