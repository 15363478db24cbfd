"""The naive peer: one transaction per record, the SPEC §3/§4 contract record by record.

confluent-kafka's Consumer in a consumer group and one psycopg connection. For each record, in
partition order: begin, INSERT the inbox marker ON CONFLICT DO NOTHING RETURNING, the history
row only when the marker is new (else roll back: AlreadyApplied), commit; only then store the
record's offset, which librdkafka's auto-commit sends to the group every
--commit-interval-ms. An error is Unknown: roll back and retry the same record, so the offset
never passes an event that is not stored.

Reports on stdout, one JSON line each: {"ready": ...} once connected, {"first_record_at":
<epoch seconds>} when the first record arrives (the harness measures from there).
"""

import json
import signal
import sys
import time

import psycopg
from confluent_kafka import Consumer, KafkaError

from inbox_sql import peer_arguments, SAVE_HISTORY_ONE, TRY_INBOX_ONE, event_of, report


def main():
    parser = peer_arguments(__doc__)
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    args = parser.parse_args()

    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    db = psycopg.connect(args.database_url, autocommit=False)
    consumer = Consumer(
        {
            "bootstrap.servers": args.brokers,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": args.commit_interval_ms,
            # Offsets are stored by hand, after the record's transaction committed.
            "enable.auto.offset.store": False,
            "session.timeout.ms": args.session_timeout_ms,
        }
    )
    consumer.subscribe([args.topic])
    report(ready=time.time())
    first = None
    applied = duplicates = retries = 0
    try:
        while running:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                print(f"per-record: {message.error()}", file=sys.stderr)
                continue
            if first is None:
                first = time.time()
                report(first_record_at=first)
            event = event_of(json.loads(message.value()))
            while True:
                try:
                    # psycopg begins the transaction with the first statement.
                    row = db.execute(
                        TRY_INBOX_ONE, (event[0], message.partition(), message.offset())
                    ).fetchone()
                    if row is None:
                        db.rollback()
                        duplicates += 1
                    else:
                        db.execute(SAVE_HISTORY_ONE, event)
                        db.commit()
                        applied += 1
                    break
                except psycopg.Error as error:
                    retries += 1
                    print(f"per-record: Unknown, retrying: {error}", file=sys.stderr)
                    try:
                        db.rollback()
                    except psycopg.Error:
                        db = psycopg.connect(args.database_url, autocommit=False)
                    time.sleep(0.1)
            consumer.store_offsets(message=message)
    finally:
        consumer.close()  # commits the stored offsets one last time
        db.close()
        report(applied=applied, duplicates=duplicates, retries=retries)


if __name__ == "__main__":
    main()
