//! `partition.metadata`: which topic a partition directory belongs to, by topic id, in
//! Kafka's file and text format (`version: 0`, `topic_id: <base64url id>`).
//!
//! Why: a partition directory is named `<topic>-<partition>`, and a name outlives its
//! topic. A directory left behind by a deleted topic (the broker was killed between the
//! committed DeleteTopics and removing the files, or, in a cluster, was down when the
//! topic was deleted) would otherwise be opened by the next topic of that name, which
//! would then serve the old topic's records as its own. Kafka keeps the topic id in this
//! file and treats a directory with another id as stray; here it is removed before the
//! partition opens, so the new topic starts empty.
//!
//! A directory without the file (written by an older shardlog) is adopted: its topic id
//! is recorded on open, as Kafka does for logs from before topic ids.
use std::path::Path;

use base64::Engine;

use super::dir_survey::DirSurvey;
use super::dma::{sync_parent_dir, write_atomic_blocking};
use super::{Result, StorageError};

pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// What `claim` found in a partition directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirClaim {
    /// No directory yet.
    Absent,
    /// The directory has no metadata file: adopted (`record` writes it).
    Ours,
    /// The directory's metadata file names this topic id already (nothing to record).
    Recorded,
    /// The directory belonged to the topic with this id; it was removed.
    RemovedStray([u8; 16]),
}

/// Kafka's text: `Uuid.toString()` is unpadded base64url.
pub fn encode(topic_id: &[u8; 16]) -> String {
    format!("version: 0\ntopic_id: {}\n", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(topic_id))
}

/// The topic id of a `partition.metadata` text; `None` if it is not one.
pub fn decode(text: &str) -> Option<[u8; 16]> {
    let mut version = None;
    let mut id = None;
    for line in text.lines() {
        let (key, value) = line.split_once(':')?;
        match key.trim() {
            "version" => version = Some(value.trim()),
            "topic_id" => id = Some(value.trim()),
            _ => return None,
        }
    }
    if version? != "0" {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(id?).ok()?;
    bytes.try_into().ok()
}

/// Before a partition opens the surveyed directory for topic `topic_id`: removes the
/// directory if its `partition.metadata` names another topic id (survey it again to
/// open). An unreadable file is an error (the operator decides), never a reason to
/// delete data.
pub async fn claim(survey: &mut DirSurvey, topic_id: [u8; 16]) -> Result<DirClaim> {
    if survey.created {
        return Ok(DirClaim::Absent);
    }
    let dir = survey.dir().to_path_buf();
    let Some(text) = survey.text_file(PARTITION_METADATA_FILE).await? else { return Ok(DirClaim::Ours) };
    let Some(found) = decode(&text) else {
        return Err(StorageError::Corrupt {
            what: format!("{}", dir.join(PARTITION_METADATA_FILE).display()),
            detail: format!("not a partition.metadata file: {:?}", text.chars().take(80).collect::<String>()),
        });
    };
    if found == topic_id {
        return Ok(DirClaim::Recorded);
    }
    let d = dir.clone();
    glommio::executor().spawn_blocking(move || std::fs::remove_dir_all(d)).await.map_err(|e| StorageError::io(format!("removing {}", dir.display()), e))?;
    // The removal is durable before a new directory of the same name appears.
    sync_parent_dir(&dir).await?;
    Ok(DirClaim::RemovedStray(found))
}

/// After the partition opened `dir`: records its topic id unless the file already holds
/// it (write to a temporary file, fsync, rename, fsync the directory).
pub async fn record(dir: &Path, topic_id: [u8; 16]) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || -> std::io::Result<()> {
            let path = d.join(PARTITION_METADATA_FILE);
            let text = encode(&topic_id);
            if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
                return Ok(());
            }
            write_atomic_blocking(&path, text.as_bytes())
        })
        .await
        .map_err(|e| StorageError::io(format!("writing {}", dir.join(PARTITION_METADATA_FILE).display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::dir_survey::survey;

    #[test]
    fn text_round_trips_in_kafkas_format() {
        let id = [7u8; 16];
        let text = encode(&id);
        assert!(text.starts_with("version: 0\ntopic_id: "));
        assert_eq!(text.lines().nth(1).unwrap().len(), "topic_id: ".len() + 22, "22 base64url characters");
        assert_eq!(decode(&text), Some(id));
    }

    #[test]
    fn other_texts_are_not_metadata() {
        assert_eq!(decode(""), None);
        assert_eq!(decode("version: 1\ntopic_id: BwcHBwcHBwcHBwcHBwcHBw\n"), None);
        assert_eq!(decode("version: 0\ntopic_id: short\n"), None);
        assert_eq!(decode("version: 0\ntopic_id: BwcHBwcHBwcHBwcHBwcHBw\nextra: 1\n"), None);
    }

    #[test]
    fn a_directory_of_another_topic_id_is_removed_and_ours_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                assert_eq!(claim(&mut survey(&dir).await.unwrap(), [1; 16]).await.unwrap(), DirClaim::Absent, "created by the survey");
                std::fs::write(dir.join("00000000000000000000.log"), b"old").unwrap();
                assert_eq!(claim(&mut survey(&dir).await.unwrap(), [1; 16]).await.unwrap(), DirClaim::Ours, "no file: adopted");
                record(&dir, [1; 16]).await.unwrap();
                assert_eq!(claim(&mut survey(&dir).await.unwrap(), [1; 16]).await.unwrap(), DirClaim::Recorded);
                assert!(dir.join("00000000000000000000.log").exists());
                assert_eq!(claim(&mut survey(&dir).await.unwrap(), [2; 16]).await.unwrap(), DirClaim::RemovedStray([1; 16]));
                assert!(!dir.exists(), "the stray directory is gone");
                std::fs::create_dir(&dir).unwrap();
                std::fs::write(dir.join(PARTITION_METADATA_FILE), b"garbage").unwrap();
                assert!(claim(&mut survey(&dir).await.unwrap(), [2; 16]).await.is_err(), "unreadable: an error, nothing deleted");
                assert!(dir.exists());
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
