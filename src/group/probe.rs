//! The group as Kafka tells it, for the group page: the topic's partitions, the group's members
//! with their assignments (DescribeGroups), its committed offsets, the partitions' ends, and for
//! partitions no live member reports on, how long their oldest waiting record has waited. Read
//! by throwaway clients on a blocking thread (never an actix thread), each read bounded by
//! [`READ_TIMEOUT`], and cached for [`CACHE_FOR`] so that page loads cannot hammer the broker.
//! Every read adds a sample to each partition's window, which [`super::status`] judges.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::status::{Sample, WINDOW};
use crate::config::KafkaConnection;
use crate::error_text::chain;
use crate::kafka::group::{DescribeError, GroupDescription, GroupOffsets};
use crate::kafka::reader::{Bounds, ReaderConfig, TopicReader};

/// How long a read of the group is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(2);
/// The longest a page waits for Kafka.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// DescribeGroups waits at most this long.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(3);
/// After DescribeGroups failed (the librdkafka mock has none), it is asked again only this much
/// later.
const DESCRIBE_RETRY: Duration = Duration::from_secs(30);
/// Samples kept per partition at most.
const MAX_SAMPLES: usize = 64;

/// What the group's read found; a part that could not be read is empty, and `problems` says
/// why.
#[derive(Debug, Clone)]
pub struct KafkaView {
    pub read_at: DateTime<Utc>,
    /// The topic's partitions, in order.
    pub partitions: Vec<i32>,
    /// DescribeGroups' answer, or why there is none.
    pub description: Result<GroupDescription, String>,
    pub committed: BTreeMap<i32, Option<i64>>,
    pub ends: BTreeMap<i32, i64>,
    /// The time of the first record after the committed offset, where it was looked up.
    pub waiting_since: BTreeMap<i32, DateTime<Utc>>,
    /// Each partition's samples, oldest first.
    pub windows: BTreeMap<i32, Vec<Sample>>,
    pub problems: Vec<String>,
}

impl KafkaView {
    fn failed(why: String, windows: BTreeMap<i32, Vec<Sample>>) -> KafkaView {
        KafkaView {
            read_at: Utc::now(),
            partitions: Vec::new(),
            description: Err(why.clone()),
            committed: BTreeMap::new(),
            ends: BTreeMap::new(),
            waiting_since: BTreeMap::new(),
            windows,
            problems: vec![why],
        }
    }
}

/// Where the group is.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub connection: KafkaConnection,
    pub topic: String,
    pub group: String,
}

/// The throwaway clients, kept between reads.
struct Clients {
    group: GroupOffsets,
    reader: TopicReader,
}

#[derive(Default)]
struct ProbeState {
    clients: Option<Clients>,
    last: Option<(Instant, Arc<KafkaView>)>,
    windows: BTreeMap<i32, VecDeque<Sample>>,
    /// DescribeGroups failed: why, and when to ask again.
    describe_failed: Option<(DescribeError, Instant)>,
}

/// Reads the group from Kafka, one read at a time, reusing a read for [`CACHE_FOR`].
pub struct KafkaProbe {
    config: ProbeConfig,
    /// The windows' clock.
    started: Instant,
    state: tokio::sync::Mutex<ProbeState>,
}

/// What one blocking read found.
struct Raw {
    partitions: Vec<i32>,
    description: Result<GroupDescription, DescribeError>,
    committed: Result<BTreeMap<i32, Option<i64>>, String>,
    ends: Result<BTreeMap<i32, i64>, String>,
    waiting_since: BTreeMap<i32, DateTime<Utc>>,
    problems: Vec<String>,
}

impl KafkaProbe {
    pub fn new(config: ProbeConfig) -> KafkaProbe {
        KafkaProbe {
            config,
            started: Instant::now(),
            state: tokio::sync::Mutex::new(ProbeState::default()),
        }
    }

    /// The group as Kafka tells it, at most [`CACHE_FOR`] old; partitions in `reported` (a
    /// live member reports their lag in seconds) are not looked up for their oldest record.
    pub async fn read(&self, reported: &BTreeSet<i32>) -> Arc<KafkaView> {
        let mut state = self.state.lock().await;
        if let Some((at, view)) = &state.last
            && at.elapsed() < CACHE_FOR
        {
            return view.clone();
        }
        let clients = state.clients.take();
        let describe = match &state.describe_failed {
            Some((why, until)) if Instant::now() < *until => Err(why.clone()),
            _ => Ok(()),
        };
        let config = self.config.clone();
        let reported = reported.clone();
        let read = tokio::task::spawn_blocking(move || {
            let clients = match clients {
                Some(clients) => clients,
                None => open(&config)?,
            };
            let raw = read_blocking(&clients, &reported, describe);
            Ok::<_, String>((clients, raw))
        });
        let view = match tokio::time::timeout(READ_TIMEOUT, read).await {
            Ok(Ok(Ok((clients, raw)))) => {
                state.clients = Some(clients);
                state.describe_failed = match &raw.description {
                    Err(failed @ DescribeError::Failed(_)) => {
                        let until = match &state.describe_failed {
                            Some((_, until)) if Instant::now() < *until => *until,
                            None => {
                                tracing::info!(
                                    error = %failed,
                                    "the broker does not describe the consumer group: the group \
                                     page shows owners as the members publish them"
                                );
                                Instant::now() + DESCRIBE_RETRY
                            }
                            Some(_) => Instant::now() + DESCRIBE_RETRY,
                        };
                        Some((failed.clone(), until))
                    }
                    _ => None,
                };
                self.sampled(&mut state, raw)
            }
            Ok(Ok(Err(why))) => KafkaView::failed(why, snapshot(&state.windows)),
            Ok(Err(_)) => KafkaView::failed(
                "the Kafka read panicked".to_owned(),
                snapshot(&state.windows),
            ),
            Err(_) => KafkaView::failed(
                format!("Kafka did not answer within {} s", READ_TIMEOUT.as_secs()),
                snapshot(&state.windows),
            ),
        };
        let view = Arc::new(view);
        state.last = Some((Instant::now(), view.clone()));
        view
    }

    /// Adds the read's samples to the windows; the view.
    fn sampled(&self, state: &mut ProbeState, raw: Raw) -> KafkaView {
        let mut problems = raw.problems;
        let committed = raw.committed.unwrap_or_else(|why| {
            problems.push(why);
            BTreeMap::new()
        });
        let ends = raw.ends.unwrap_or_else(|why| {
            problems.push(why);
            BTreeMap::new()
        });
        let at = self.started.elapsed();
        for (&partition, &end) in &ends {
            let Some(&committed) = committed.get(&partition) else {
                continue;
            };
            let window = state.windows.entry(partition).or_default();
            window.push_back(Sample { at, committed, end });
            while window.len() > MAX_SAMPLES
                || window
                    .front()
                    .is_some_and(|s| at.saturating_sub(s.at) > WINDOW)
            {
                window.pop_front();
            }
        }
        state
            .windows
            .retain(|partition, _| raw.partitions.contains(partition));
        KafkaView {
            read_at: Utc::now(),
            partitions: raw.partitions,
            description: raw.description.map_err(|e| e.to_string()),
            committed,
            ends,
            waiting_since: raw.waiting_since,
            windows: snapshot(&state.windows),
            problems,
        }
    }
}

fn snapshot(windows: &BTreeMap<i32, VecDeque<Sample>>) -> BTreeMap<i32, Vec<Sample>> {
    windows
        .iter()
        .map(|(p, w)| (*p, w.iter().copied().collect()))
        .collect()
}

fn open(config: &ProbeConfig) -> Result<Clients, String> {
    let group = GroupOffsets::open(&config.connection, &config.topic, &config.group)
        .map_err(|e| chain(&e))?;
    let reader = TopicReader::open(&ReaderConfig {
        connection: config.connection.clone(),
        topic: config.topic.clone(),
    })
    .map_err(|e| chain(&e))?;
    Ok(Clients { group, reader })
}

/// One read of the group; blocks.
fn read_blocking(
    clients: &Clients,
    reported: &BTreeSet<i32>,
    describe: Result<(), DescribeError>,
) -> Raw {
    let mut problems = Vec::new();
    let partitions = clients.reader.partitions().unwrap_or_else(|error| {
        problems.push(chain(&error));
        Vec::new()
    });
    let description = describe.and_then(|()| clients.group.describe(DESCRIBE_TIMEOUT));
    let committed = clients
        .group
        .committed_within(&partitions, READ_TIMEOUT)
        .map_err(|e| chain(&e));
    let ends = if partitions.is_empty() {
        Ok(BTreeMap::new())
    } else {
        clients.reader.ends(&partitions).map_err(|e| chain(&e))
    };
    let mut waiting_since = BTreeMap::new();
    if let (Ok(committed), Ok(ends)) = (&committed, &ends) {
        let waiting: BTreeMap<i32, Bounds> = ends
            .iter()
            .filter(|(p, _)| !reported.contains(p))
            .filter_map(|(&p, &end)| {
                let start = committed.get(&p).copied().flatten().unwrap_or(0);
                (start < end).then_some((p, Bounds { start, end }))
            })
            .collect();
        if !waiting.is_empty() {
            match clients.reader.first_times(&waiting) {
                Ok(times) => {
                    waiting_since = times
                        .into_iter()
                        .filter_map(|(p, t)| Some((p, t?)))
                        .collect()
                }
                Err(error) => problems.push(chain(&error)),
            }
        }
    }
    Raw {
        partitions,
        description,
        committed,
        ends,
        waiting_since,
        problems,
    }
}
