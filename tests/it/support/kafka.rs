//! Kafka plumbing for tests: a topic on one of two brokers (librdkafka's mock cluster in
//! process, or the tansu server of this test process), real producers, plain and
//! transactional, and reading committed offsets and high watermarks as the broker knows them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// The broker a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broker {
    /// librdkafka's mock cluster, in this process: quick rebalances, broker outages on
    /// demand, no transaction markers in the log.
    Mock,
    /// The tansu server of this test process (`tansu.rs`): a real TCP server with its own
    /// group coordinator and commit markers in the log; group joins take longer.
    Tansu,
}

impl Broker {
    /// How long a test may wait for a group join or a rebalance to settle: tansu was seen
    /// taking over 10 s to answer a JoinGroup.
    pub fn join_deadline(self) -> Duration {
        match self {
            Broker::Mock => Duration::from_secs(30),
            Broker::Tansu => Duration::from_secs(90),
        }
    }

    /// Whether a committed transaction leaves a commit marker in the log (one offset per
    /// partition it wrote to): tansu does, the mock cluster does not.
    pub fn writes_commit_markers(self) -> bool {
        match self {
            Broker::Mock => false,
            Broker::Tansu => true,
        }
    }
}

/// Runs a test on both brokers: `on_both_brokers!(name)` defines the tests `name_on_the_mock`
/// and `name_on_tansu`, each calling `async fn name(broker: Broker)` with its broker, so the
/// body is written once and a behaviour the mock alone has shown is never taken as proven.
/// `on_both_brokers!(name = body(args))` names the tests `name_…` and calls
/// `body(broker, args)` (one body shared by several tests).
macro_rules! on_both_brokers {
    ($name:ident) => {
        $crate::support::kafka::on_both_brokers!($name = $name());
    };
    ($name:ident = $body:ident($($arg:expr),* $(,)?)) => {
        ::pastey::paste! {
            #[actix_web::test]
            async fn [<$name _on_the_mock>]() {
                $body($crate::support::kafka::Broker::Mock $(, $arg)*).await;
            }

            #[actix_web::test]
            async fn [<$name _on_tansu>]() {
                $body($crate::support::kafka::Broker::Tansu $(, $arg)*).await;
            }
        }
    };
}
pub(crate) use on_both_brokers;

/// A topic with `partitions` partitions on a broker. Not `Send` (the mock cluster lives in
/// it): it stays on the test's thread.
pub struct TestKafka {
    pub broker: Broker,
    mock: Option<MockCluster<'static, DefaultProducerContext>>,
    pub brokers: String,
    pub topic: String,
    pub partitions: i32,
    /// librdkafka properties every client of this broker needs besides `bootstrap.servers`
    /// (TLS, say); the service gets them too.
    pub options: Vec<(String, String)>,
    acknowledged: Acknowledged,
}

/// One past the highest offset the broker acknowledged per partition, for producers of
/// ours: a lower bound for the high watermarks.
#[derive(Clone)]
pub struct Acknowledged(Arc<Mutex<Vec<i64>>>);

impl Acknowledged {
    fn new(partitions: i32) -> Acknowledged {
        Acknowledged(Arc::new(Mutex::new(vec![0; partitions as usize])))
    }

    /// Notes a record the broker acknowledged at `offset`.
    pub fn record(&self, partition: i32, offset: i64) {
        let mut ends = self.0.lock().expect("acknowledged lock");
        let end = &mut ends[partition as usize];
        *end = (*end).max(offset + 1);
    }

    fn snapshot(&self) -> Vec<i64> {
        self.0.lock().expect("acknowledged lock").clone()
    }
}

/// Records of one transaction and whether it is committed or aborted.
pub struct Transaction {
    pub records: Vec<(i32, Vec<u8>)>,
    pub commit: bool,
}

impl TestKafka {
    /// A topic on a fresh mock cluster.
    pub fn start(partitions: i32) -> TestKafka {
        let cluster = MockCluster::new(1).expect("mock cluster");
        let topic = crate::support::helpers::unique_name("tickets");
        cluster
            .create_topic(&topic, partitions, 1)
            .expect("create topic");
        TestKafka {
            broker: Broker::Mock,
            brokers: cluster.bootstrap_servers(),
            mock: Some(cluster),
            topic,
            partitions,
            options: Vec::new(),
            acknowledged: Acknowledged::new(partitions),
        }
    }

    /// A fresh topic on `broker` (tansu is started on first use).
    pub async fn start_on(broker: Broker, partitions: i32) -> TestKafka {
        match broker {
            Broker::Mock => TestKafka::start(partitions),
            Broker::Tansu => {
                let server = crate::support::tansu::server();
                let topic = crate::support::helpers::unique_name("tickets");
                server.create_topic(&topic, partitions).await;
                TestKafka {
                    broker,
                    mock: None,
                    brokers: server.brokers.clone(),
                    topic,
                    partitions,
                    options: Vec::new(),
                    acknowledged: Acknowledged::new(partitions),
                }
            }
        }
    }

    /// A topic on a broker of the test's choosing, reached with `options` (see
    /// `tls_kafka.rs`); the topic must exist.
    pub fn on(
        brokers: String,
        options: Vec<(String, String)>,
        topic: String,
        partitions: i32,
    ) -> TestKafka {
        TestKafka {
            broker: Broker::Tansu,
            mock: None,
            brokers,
            topic,
            partitions,
            options,
            acknowledged: Acknowledged::new(partitions),
        }
    }

    /// A client configuration for this broker: `bootstrap.servers` and [`TestKafka::options`].
    pub fn client(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        for (key, value) in &self.options {
            config.set(key, value);
        }
        config
    }

    /// The mock cluster, for what only it can do (take a broker down).
    pub fn mock(&self) -> &MockCluster<'static, DefaultProducerContext> {
        self.mock
            .as_ref()
            .expect("the mock cluster: this test runs on the mock only")
    }

    /// How long a group join or rebalance may take on this broker.
    pub fn join_deadline(&self) -> Duration {
        self.broker.join_deadline()
    }

    pub fn producer(&self) -> FutureProducer {
        self.client()
            .set("message.max.bytes", "2000000")
            .set("linger.ms", "5")
            .create()
            .expect("producer")
    }

    /// Where producers that do not go through [`TestKafka::send`] note their acknowledged
    /// records, so that [`TestKafka::ends`] can check the broker's answer against them.
    pub fn acknowledged(&self) -> Acknowledged {
        self.acknowledged.clone()
    }

    /// Produces `numbered_event(i)` for each `i` of `range` to `partition`, keyed "k", each
    /// acknowledged before the next.
    pub async fn send_numbered(&self, range: std::ops::Range<usize>, partition: i32) {
        let producer = self.producer();
        for i in range {
            self.send(&producer, Some(partition), "k", &numbered_event(i))
                .await;
        }
    }

    /// Produces one record and waits for the broker's ack; returns (partition, offset).
    pub async fn send(
        &self,
        producer: &FutureProducer,
        partition: Option<i32>,
        key: &str,
        payload: &[u8],
    ) -> (i32, i64) {
        let mut attempt = 1;
        let delivery = loop {
            let mut record = FutureRecord::to(&self.topic).key(key).payload(payload);
            if let Some(p) = partition {
                record = record.partition(p);
            }
            match producer.send(record, Duration::from_secs(10)).await {
                Ok(delivery) => break delivery,
                // tansu's sqlite engine refuses a write that meets another (see
                // `TANSU_BUSY_TRIES`); librdkafka does not retry a -1.
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::Unknown), _))
                    if attempt < crate::support::tansu::TANSU_BUSY_TRIES =>
                {
                    tokio::time::sleep(crate::support::tansu::TANSU_BUSY_PAUSE * attempt).await;
                    attempt += 1;
                }
                Err((error, _)) => panic!("delivered: {error:?}"),
            }
        };
        self.acknowledged
            .record(delivery.partition, delivery.offset);
        (delivery.partition, delivery.offset)
    }

    /// Produces `transactions` in order with one transactional producer (a fresh
    /// `transactional.id`); returns the (partition, offset) of each record as acknowledged,
    /// per transaction. Runs off the test's thread: librdkafka's transaction calls block.
    ///
    /// An aborted transaction is aborted right after its records are queued, so librdkafka
    /// purges them and the log holds none. Aborted records that do reach the log are handed to
    /// read_committed consumers by both brokers (flushed before the abort, the service stored
    /// every one of them).
    pub async fn send_transactions(&self, transactions: Vec<Transaction>) -> Vec<Vec<(i32, i64)>> {
        let (client, topic, acknowledged) =
            (self.client(), self.topic.clone(), self.acknowledged.clone());
        tokio::task::spawn_blocking(move || {
            let producer: FutureProducer = client
                .clone()
                .set(
                    "transactional.id",
                    crate::support::helpers::unique_name("tx"),
                )
                .create()
                .expect("transactional producer");
            let timeout = Duration::from_secs(30);
            producer
                .init_transactions(timeout)
                .expect("init transactions");
            let mut delivered = Vec::new();
            for transaction in transactions {
                producer.begin_transaction().expect("begin");
                let deliveries: Vec<_> = transaction
                    .records
                    .iter()
                    .map(|(partition, body)| {
                        let record = FutureRecord::to(&topic)
                            .partition(*partition)
                            .key("k")
                            .payload(body);
                        producer
                            .send_result(record)
                            .map_err(|(e, _)| e)
                            .expect("enqueued")
                    })
                    .collect();
                if transaction.commit {
                    producer.commit_transaction(timeout).expect("commit");
                } else {
                    producer.abort_transaction(timeout).expect("abort");
                }
                let offsets: Vec<(i32, i64)> = deliveries
                    .into_iter()
                    .filter_map(|delivery| futures::executor::block_on(delivery).ok())
                    .filter_map(Result::ok)
                    .map(|d| (d.partition, d.offset))
                    .collect();
                if transaction.commit {
                    assert_eq!(offsets.len(), transaction.records.len(), "all delivered");
                    for (partition, offset) in &offsets {
                        acknowledged.record(*partition, *offset);
                    }
                }
                delivered.push(offsets);
            }
            delivered
        })
        .await
        .expect("transactions task")
    }

    /// Commits `offsets` (per partition, in order) for `group` from outside the group, as an
    /// operator's tool would while no member is active.
    pub async fn commit_for(&self, group: &str, offsets: &[i64]) {
        let (client, topic, group) = (self.client(), self.topic.clone(), group.to_owned());
        let offsets = offsets.to_vec();
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = client
                .clone()
                .set("group.id", &group)
                .create()
                .expect("consumer");
            let mut tpl = TopicPartitionList::new();
            for (partition, offset) in offsets.iter().enumerate() {
                tpl.add_partition_offset(&topic, partition as i32, Offset::Offset(*offset))
                    .expect("a position");
            }
            consumer
                .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
                .expect("committed");
        })
        .await
        .expect("commit task");
    }

    /// Committed positions of `group` per partition (-1 when none), as the broker has them.
    pub async fn committed(&self, group: &str) -> Vec<i64> {
        let (client, topic, partitions, group) = (
            self.client(),
            self.topic.clone(),
            self.partitions,
            group.to_owned(),
        );
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = client
                .clone()
                .set("group.id", &group)
                .create()
                .expect("consumer");
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition(&topic, p);
            }
            let committed = consumer
                .committed_offsets(tpl, Duration::from_secs(10))
                .expect("committed offsets");
            let offsets = (0..partitions)
                .map(
                    |p| match committed.find_partition(&topic, p).map(|e| e.offset()) {
                        Some(Offset::Offset(o)) => o,
                        _ => -1,
                    },
                )
                .collect();
            // Lists must go before the consumer (dropping it otherwise hangs).
            drop(committed);
            offsets
        })
        .await
        .expect("committed offsets task")
    }

    /// High watermarks (next offset to be written, transaction markers included) per
    /// partition, as a consumer reading the whole topic finds them at its end.
    ///
    /// Not a ListOffsets query: tansu 0.6 answers it with the base offset of the partition's
    /// last batch plus one (10 records produced in one batch: end 1), so the broker is asked
    /// through fetches instead, on both brokers alike. The answer is also checked against
    /// what our producers were acknowledged.
    pub async fn ends(&self) -> Vec<i64> {
        let (client, topic, partitions) = (self.client(), self.topic.clone(), self.partitions);
        let acknowledged = self.acknowledged.clone();
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = client
                .clone()
                // Needed to assign; this consumer never joins the group nor commits.
                .set("group.id", crate::support::helpers::unique_name("ends"))
                .set("enable.auto.commit", "false")
                .set("isolation.level", "read_uncommitted")
                .set("enable.partition.eof", "true")
                .set("fetch.wait.max.ms", "10")
                .create()
                .expect("consumer");
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition_offset(&topic, p, Offset::Beginning)
                    .expect("partition");
            }
            consumer.assign(&tpl).expect("assign");
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut at_end = vec![false; partitions as usize];
            loop {
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Err(KafkaError::PartitionEOF(p))) => at_end[p as usize] = true,
                    Some(Err(error)) => panic!("reading {topic} to its end: {error}"),
                    Some(Ok(_)) | None => {}
                }
                if at_end.iter().all(|&end| end) {
                    // The position after the end of an empty partition is "invalid": 0.
                    let positions = consumer.position().expect("positions");
                    let ends: Vec<i64> = (0..partitions)
                        .map(
                            |p| match positions.find_partition(&topic, p).map(|e| e.offset()) {
                                Some(Offset::Offset(o)) => o,
                                _ => 0,
                            },
                        )
                        .collect();
                    drop(positions);
                    let floor = acknowledged.snapshot();
                    if ends.iter().zip(&floor).all(|(end, ack)| end >= ack) {
                        return ends;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "{topic} ends at {ends:?}, short of the acknowledged {floor:?}"
                    );
                }
                assert!(
                    Instant::now() < deadline,
                    "{topic} not read to its end in time: {at_end:?}"
                );
            }
        })
        .await
        .expect("watermarks task")
    }
}

/// The source document's events.
pub fn payload(event_id: &str, ticket_id: &str, from: &str, to: &str, changed_at: &str) -> Vec<u8> {
    serde_json::json!({
        "event_id": event_id,
        "ticket_id": ticket_id,
        "from_status": from,
        "to_status": to,
        "changed_at": changed_at,
    })
    .to_string()
    .into_bytes()
}

/// A distinct valid event number `i` (tickets cycle so that each has several events).
pub fn numbered_event(i: usize) -> Vec<u8> {
    payload(
        &format!("event-{i}"),
        &format!("ticket-{}", i % 13),
        "open",
        "resolved",
        "2026-10-03T08:00:00Z",
    )
}

/// The source document's `event-ticket-900` as its producer sends it.
pub fn story_900() -> Vec<u8> {
    history_consumer::domain::story::event_900()
        .to_json()
        .into_bytes()
}

/// The source document's `event-ticket-901`.
pub fn story_901() -> Vec<u8> {
    history_consumer::domain::story::event_901()
        .to_json()
        .into_bytes()
}

/// Produces events `range`, round robin over the partitions, all in flight at once.
pub async fn produce(kafka: &TestKafka, range: std::ops::Range<usize>) {
    let producer = kafka.producer();
    let partitions = kafka.partitions as usize;
    let sends = range.map(|i| {
        let producer = &producer;
        async move {
            let body = numbered_event(i);
            kafka
                .send(producer, Some((i % partitions) as i32), "k", &body)
                .await
        }
    });
    futures::future::join_all(sends).await;
}

/// Waits until the broker has `ends` committed for `group`.
pub async fn wait_committed(kafka: &TestKafka, group: &str, ends: &[i64], timeout: Duration) {
    let mut last = Vec::new();
    let reached = tokio::time::timeout(timeout, async {
        loop {
            last = kafka.committed(group).await;
            if last == ends {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(reached.is_ok(), "committed {last:?} never reached {ends:?}");
}

/// A point in time as operators type it and as record timestamps go (milliseconds, UTC).
pub fn point_in_time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A point in time strictly between the records produced before it and after it (record
/// timestamps are milliseconds).
pub async fn a_moment_between() -> chrono::DateTime<chrono::Utc> {
    let moment = chrono::Utc::now() + chrono::Duration::milliseconds(1);
    crate::support::helpers::wait_for(Duration::from_secs(5), "the clock to pass", || async {
        (chrono::Utc::now() > moment).then_some(())
    })
    .await;
    moment
}
