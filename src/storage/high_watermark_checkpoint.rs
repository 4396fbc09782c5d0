//! The high watermark of one partition, saved in its directory so that a restarted
//! replica (leader or follower) starts from it rather than from 0 (Kafka's
//! `replication-offset-checkpoint`, one per log dir; one small file per partition fits
//! our shard ownership). A checked file like the others (magic, version, CRC-32C),
//! holding the offset as 8 bytes big-endian, overwritten through the page cache with no
//! sync (`write_checked_file_unsynced`): losing it is safe, and syncing a file per
//! partition every few seconds stalled the segment writes.
//!
//! The layer above saves it in the background (every few seconds and at close) and at
//! open clamps what it loads to the recovered log end: the saved value may be older than
//! the last one served (never newer than what the ISR had), and a crash may have cut the
//! log below it. Saves of one partition must not overlap (they share the temporary file):
//! the caller runs one at a time.
use std::future::Future;
use std::path::Path;

use super::dir_survey::DirSurvey;
use super::dma::{read_checked_file, write_checked_file_unsynced};
use super::{Result, StorageError};

pub const HIGH_WATERMARK_FILE: &str = "high-watermark-checkpoint";
const HW_MAGIC: u32 = 0x534c_4857; // "SLHW"
const HW_VERSION: u16 = 1;

/// The saved high watermark of the partition in `dir`; `Ok(None)` when none was saved.
/// `StorageError::Corrupt` for a damaged file (the caller may start from none).
pub async fn load(dir: &Path) -> Result<Option<i64>> {
    let path = dir.join(HIGH_WATERMARK_FILE);
    let payload = read_checked_file(&path, HW_MAGIC, HW_VERSION).await?;
    decode(&path, payload)
}

/// `load` from the directory's survey (read with the rest of the directory at open).
pub async fn load_surveyed(survey: &mut DirSurvey) -> Result<Option<i64>> {
    let payload = survey.checked_file(HIGH_WATERMARK_FILE, HW_MAGIC, HW_VERSION).await?;
    decode(&survey.dir().join(HIGH_WATERMARK_FILE), payload)
}

fn decode(path: &Path, payload: Option<Vec<u8>>) -> Result<Option<i64>> {
    let Some(payload) = payload else { return Ok(None) };
    let corrupt = |detail: &str| StorageError::Corrupt { what: path.display().to_string(), detail: detail.into() };
    let bytes: [u8; 8] = payload.as_slice().try_into().map_err(|_| corrupt("not 8 bytes"))?;
    let hw = i64::from_be_bytes(bytes);
    if hw < 0 {
        return Err(corrupt("negative high watermark"));
    }
    Ok(Some(hw))
}

/// Saves `high_watermark` for the partition in `dir`, as a future that borrows nothing
/// (spawn it; see the module comment on overlapping saves).
pub fn save_job(dir: &Path, high_watermark: i64) -> impl Future<Output = Result<()>> + 'static {
    debug_assert!(high_watermark >= 0, "a high watermark is an offset");
    let path = dir.join(HIGH_WATERMARK_FILE);
    async move { write_checked_file_unsynced(&path, HW_MAGIC, HW_VERSION, &high_watermark.to_be_bytes()).await }
}

/// `save_job`, awaited.
pub async fn save(dir: &Path, high_watermark: i64) -> Result<()> {
    save_job(dir, high_watermark).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::run;

    #[test]
    fn saved_high_watermark_loads_back_and_damage_is_reported() {
        run(|dir| async move {
            assert_eq!(load(&dir).await.unwrap(), None, "nothing saved yet");
            save(&dir, 42).await.unwrap();
            assert_eq!(load(&dir).await.unwrap(), Some(42));
            // A spawned save, as the partition runs it.
            let job = save_job(&dir, 1 << 40);
            glommio::spawn_local(job).await.unwrap();
            assert_eq!(load(&dir).await.unwrap(), Some(1 << 40));
            let path = dir.join(HIGH_WATERMARK_FILE);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[16] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            assert!(matches!(load(&dir).await, Err(StorageError::Corrupt { .. })), "a flipped bit fails the CRC-32C");
            // Saved in place: the same file (nothing freed), a longer one cut to the data.
            use std::os::unix::fs::MetadataExt;
            std::fs::write(&path, vec![0u8; 4096]).unwrap();
            let inode = std::fs::metadata(&path).unwrap().ino();
            save(&dir, 7).await.unwrap();
            assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "not replaced");
            assert_eq!(load(&dir).await.unwrap(), Some(7));
        });
    }
}
