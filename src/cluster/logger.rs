//! raft-rs logs through `slog`; this drain forwards its records to `tracing` (target
//! `tidelog::cluster::raft`), so a node's Raft elections show up with `RUST_LOG=info`
//! like every other tidelog log line.

use std::fmt::Write as _;

use slog::{Drain, Key, Level, OwnedKVList, Record, Serializer, o};

struct TracingDrain;

/// Collects a record's key-value pairs as `key=value` text.
struct Fields(String);

impl Serializer for Fields {
    fn emit_arguments(&mut self, key: Key, val: &std::fmt::Arguments<'_>) -> slog::Result {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        let _ = write!(self.0, "{key}={val}");
        Ok(())
    }
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        use slog::KV;
        let mut fields = Fields(String::new());
        let _ = record.kv().serialize(record, &mut fields);
        let _ = values.serialize(record, &mut fields);
        let msg = record.msg();
        let fields = fields.0;
        match record.level() {
            Level::Critical | Level::Error => {
                tracing::error!(target: "tidelog::cluster::raft", %fields, "{msg}")
            }
            Level::Warning => tracing::warn!(target: "tidelog::cluster::raft", %fields, "{msg}"),
            Level::Info => tracing::info!(target: "tidelog::cluster::raft", %fields, "{msg}"),
            Level::Debug => tracing::debug!(target: "tidelog::cluster::raft", %fields, "{msg}"),
            Level::Trace => tracing::trace!(target: "tidelog::cluster::raft", %fields, "{msg}"),
        }
        Ok(())
    }
}

/// The logger handed to raft-rs for node `node_id`.
pub(crate) fn raft_logger(node_id: i32) -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), o!("node" => node_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_collected_as_text() {
        let logger = raft_logger(3);
        // Goes to tracing (no subscriber in this test): must not panic.
        slog::info!(logger, "became leader"; "term" => 2);
        let mut f = Fields(String::new());
        f.emit_arguments("term", &format_args!("{}", 2)).unwrap();
        f.emit_arguments("vote", &format_args!("{}", 1)).unwrap();
        assert_eq!(f.0, "term=2 vote=1");
    }
}
