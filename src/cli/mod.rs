//! Command-line tools that talk to a running broker over the Kafka protocol.
//!
//! - `client.rs` a blocking request/response connection
//! - `cluster.rs` `shardlog cluster status|quorum`: brokers, roles, leaders, URPs; the quorum
//! - `topic.rs`  `shardlog topic create|list|describe|delete`
//! - `group.rs`  `shardlog group list|describe`
//! - `txn.rs`    `shardlog txn list|producers|abort`
//! - `top.rs`    `shardlog top`: a live view of brokers' /metrics (admin listeners, HTTP)
//! - `tune.rs`   `shardlog tune --check | --apply`: the host checks of `crate::tune`
//!
//! A client: it never imports the broker's inside (`server::`, `partition::`, `storage::`,
//! `cluster::`, `group::`, `controller::`).
pub mod client;
pub mod cluster;
pub mod decommission;
pub mod group;
pub mod replica_moves;
pub mod top;
pub mod topic;
pub mod topic_storage;
pub mod tune;
pub mod txn;

/// Prints `rows` under `header`, each column as wide as its widest cell, two spaces apart.
pub(crate) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line =
        |cells: &mut dyn Iterator<Item = &str>| cells.zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string();
    println!("{}", line(&mut header.iter().copied()));
    for row in rows {
        println!("{}", line(&mut row.iter().map(String::as_str)));
    }
}
