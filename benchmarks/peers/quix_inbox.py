"""The framework peer: Quix Streams (https://quix.io/docs/quix-streams/) running the same batched
inbox transaction as the service.

An Application in a consumer group reads the topic (JSON values) into a StreamingDataFrame whose
only step is a sink: a BatchingSink, Quix Streams' own abstraction for "accumulate, write at the
checkpoint, commit offsets after" (at-least-once). Quix keeps one batch per partition and, every
--commit-interval seconds (its checkpoint), calls write() once per partition and commits the
consumer's offsets to Kafka only after every write succeeded. write() is the service's batch
transaction (src/inbox/batch.rs): one multi-row inbox insert ON CONFLICT DO NOTHING RETURNING
event_id, one multi-row history insert for exactly the ids that came back, one commit. A
failing write fails the checkpoint: nothing is committed and the records are read again.

Reports on stdout, one JSON line each: {"ready": ...} when the application starts,
{"first_record_at": <epoch seconds>} when the sink gets its first record.
"""

import logging
import tempfile
import time

import psycopg
from quixstreams import Application
from quixstreams.sinks import BatchingSink, SinkBatch

from inbox_sql import peer_arguments, SAVE_HISTORY_MANY, TRY_INBOX_MANY, event_of, report


class InboxSink(BatchingSink):
    """One inbox transaction per partition's batch at each checkpoint."""

    def __init__(self, database_url):
        super().__init__()
        self._database_url = database_url
        self._db = None
        self._first = None
        self.batches = 0
        self.applied = 0
        self.write_seconds = 0.0
        # When this process first saw a record of each partition (a partition seen by two
        # processes of one group was moved by a rebalance).
        self.partitions = {}

    def setup(self):
        self._db = psycopg.connect(self._database_url, autocommit=False)

    def add(self, value, key, timestamp, headers, topic, partition, offset):
        if partition not in self.partitions:
            self.partitions[partition] = time.time()
            if self._first is None:
                self._first = self.partitions[partition]
                report(first_record_at=self._first)
        super().add(value, key, timestamp, headers, topic, partition, offset)

    def write(self, batch: SinkBatch):
        started = time.perf_counter()
        partition = batch.partition
        # The first occurrence of an id in the batch is the one stored (as the service does).
        first = {}
        for item in batch:
            event = event_of(item.value)
            if event[0] not in first:
                first[event[0]] = (event, item.offset)
        ids = list(first)
        offsets = [first[i][1] for i in ids]
        try:
            new = self._db.execute(
                TRY_INBOX_MANY, (ids, [partition] * len(ids), offsets)
            ).fetchall()
            if new:
                rows = [first[r[0]][0] for r in new]
                self._db.execute(SAVE_HISTORY_MANY, [list(column) for column in zip(*rows)])
            self._db.commit()
        except BaseException:
            self._db.rollback()
            raise
        self.batches += 1
        self.applied += len(new)
        self.write_seconds += time.perf_counter() - started


def main():
    parser = peer_arguments(__doc__)
    parser.add_argument(
        "--commit-interval",
        type=float,
        default=1.0,
        help="seconds between checkpoints: the batch per partition and the offset commit",
    )
    parser.add_argument(
        "--poll-timeout",
        type=float,
        default=1.0,
        help="consumer_poll_timeout: how long one poll waits when nothing is there",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="quix-state-") as state_dir:
        app = Application(
            broker_address=args.brokers,
            consumer_group=args.group,
            auto_offset_reset="earliest",
            commit_interval=args.commit_interval,
            commit_every=0,
            consumer_poll_timeout=args.poll_timeout,
            consumer_extra_config={"session.timeout.ms": args.session_timeout_ms},
            state_dir=state_dir,
            use_changelog_topics=False,
            auto_create_topics=False,
            loglevel=logging.WARNING,
        )
        topic = app.topic(args.topic, value_deserializer="json", key_deserializer="bytes")
        sink = InboxSink(args.database_url)
        app.dataframe(topic).sink(sink)
        report(ready=time.time())
        try:
            app.run()  # until SIGTERM/SIGINT; a last checkpoint on the way out
        finally:
            report(
                batches=sink.batches,
                applied=sink.applied,
                write_seconds=round(sink.write_seconds, 3),
                partitions={p: round(t, 3) for p, t in sink.partitions.items()},
            )


if __name__ == "__main__":
    main()
