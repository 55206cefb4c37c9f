//! A minimal backend over a [`LogManager`](crate::LogManager) for the server's own unit
//! tests: topics are `name -> partition count` in memory, logs `name-p` on disk (so a
//! reopened data directory keeps its data; topics are rediscovered from the log
//! directory names).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::backend::{Backend, PartitionOps};
use crate::{Error, LogConfig, LogManager, Result};

pub(crate) struct TestBackend {
    logs: LogManager,
    topics: Mutex<BTreeMap<String, i32>>,
}

impl TestBackend {
    pub(crate) fn open(dir: &Path) -> Arc<TestBackend> {
        let logs = LogManager::open(dir).unwrap();
        let mut topics = BTreeMap::new();
        for name in logs.names_on_disk().unwrap() {
            if let Some((topic, p)) = name.rsplit_once('-')
                && let Ok(p) = p.parse::<i32>()
            {
                let n = topics.entry(topic.to_string()).or_insert(0);
                *n = (*n).max(p + 1);
            }
        }
        Arc::new(TestBackend {
            logs,
            topics: Mutex::new(topics),
        })
    }
}

impl Backend for TestBackend {
    fn topic_names(&self) -> Vec<String> {
        self.topics.lock().keys().cloned().collect()
    }
    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.topics.lock().get(topic).copied()
    }
    fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()> {
        self.validate_topic(name, partitions, configs)?;
        let partitions = if partitions < 0 { 1 } else { partitions };
        let mut config = LogConfig::default();
        for (k, v) in configs {
            config.set(k, v)?;
        }
        for p in 0..partitions {
            self.logs.open_log(&format!("{name}-{p}"), config.clone())?;
        }
        self.topics.lock().insert(name.to_string(), partitions);
        Ok(())
    }
    fn validate_topic(
        &self,
        name: &str,
        _partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::InvalidTopicName {
                name: name.into(),
                reason: "not a valid name".into(),
            });
        }
        if self.topics.lock().contains_key(name) {
            return Err(Error::TopicExists(name.into()));
        }
        let mut config = LogConfig::default();
        for (k, v) in configs {
            config.set(k, v)?;
        }
        Ok(())
    }
    fn delete_topic(&self, name: &str) -> Result<()> {
        let count = self
            .topics
            .lock()
            .remove(name)
            .ok_or_else(|| Error::UnknownTopic(name.into()))?;
        for p in 0..count {
            self.logs.delete_log(&format!("{name}-{p}"))?;
        }
        Ok(())
    }
    fn partition(&self, topic: &str, partition: i32) -> Result<Arc<dyn PartitionOps>> {
        let count = self
            .partition_count(topic)
            .ok_or_else(|| Error::UnknownTopic(topic.into()))?;
        if partition < 0 || partition >= count {
            return Err(Error::UnknownPartition {
                topic: topic.into(),
                partition,
                count,
            });
        }
        let name = format!("{topic}-{partition}");
        let log = match self.logs.get(&name) {
            Some(log) => log,
            None => self.logs.open_log(&name, LogConfig::default())?,
        };
        Ok(Arc::new(log))
    }
    fn topic_configs(&self, topic: &str) -> Result<Vec<(String, String)>> {
        Ok(self.partition_for_config(topic)?.config().to_pairs())
    }
    fn data_dir(&self) -> PathBuf {
        self.logs.dir().to_path_buf()
    }
    fn close(&self) -> Result<()> {
        self.logs.close()
    }
}

impl TestBackend {
    fn partition_for_config(&self, topic: &str) -> Result<crate::PartitionLog> {
        self.partition_count(topic)
            .ok_or_else(|| Error::UnknownTopic(topic.into()))?;
        let name = format!("{topic}-0");
        match self.logs.get(&name) {
            Some(log) => Ok(log),
            None => self.logs.open_log(&name, LogConfig::default()),
        }
    }
}
