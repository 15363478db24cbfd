"""scripts/bench-peers: the service beside two peers, measured from outside on one broker server.

Starts a throwaway PostgreSQL (initdb in a temporary directory; PostgreSQL's defaults, so fsync
and synchronous_commit on) and tansu (a Kafka-compatible broker server, its own process),
creates a topic, publishes the workload once with the service's own `produce` subcommand, reads
it back to know its ends and its unique events, and then runs, one after the other, each
consumer in a consumer group of its own into a fresh database migrated by
`history-consumer migrate`:

  service      target/release/history-consumer run, production defaults
  framework    Quix Streams with the batched inbox transaction (quix_inbox.py)
  per-record   confluent-kafka + psycopg, one transaction per record (per_record.py)

Each is timed from its first consumed record to its committed offsets (read from the broker)
reaching the end of every partition; then its rows are checked against the unique events.
Writes its section into BENCHMARKS.md (below the hand-written notes' marker) with --write.
"""

import argparse
import datetime as dt
import glob
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
KINDS = ("service", "framework", "per-record", "framework-scaled")
DEFAULT_KINDS = KINDS
NOTES_MARKER = (
    "<!-- Notes below this line are written by hand; `history-consumer bench` keeps them. -->"
)
SECTION_START = "<!-- bench-peers: written by `scripts/bench-peers --write`; `bench` keeps it -->"
SECTION_END = "<!-- /bench-peers -->"
NOTES_START = "<!-- bench-peers notes: written by hand; `scripts/bench-peers --write` keeps them -->"


def say(text):
    print(f"bench-peers: {text}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# CPU time from /proc (user + system, all threads), in seconds.


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0


def children_of(pid):
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(stat.split("/")[2]))
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass
    return out


def tree_cpu(pid):
    """A process and its direct children (PostgreSQL's postmaster and its backends)."""
    return cpu_seconds(pid) + sum(cpu_seconds(c) for c in children_of(pid))


# ---------------------------------------------------------------------------------------------
# PostgreSQL


class Postgres:
    def __init__(self):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
        if not bins:
            sys.exit("bench-peers: no PostgreSQL under /usr/lib/postgresql/*/bin (scripts/install-deps)")
        self.bin = Path(bins[-1])
        self.dir = Path(tempfile.mkdtemp(prefix="bench-peers-pg-"))
        self.port = free_port()
        root = os.geteuid() == 0
        self.user = "nobody" if root else None  # PostgreSQL refuses to run as root
        if root:
            shutil.chown(self.dir, "nobody", "nogroup")
        env = dict(os.environ, LC_ALL="C")
        env.pop("PGDATA", None)
        self.env = env
        subprocess.run(
            [self.bin / "initdb", "-D", self.dir / "data", "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            check=True, user=self.user, env=env, stdout=subprocess.DEVNULL,
        )
        self.log = open(self.dir / "postgres.log", "ab")
        if root:
            shutil.chown(self.dir / "postgres.log", "nobody", "nogroup")
        # PostgreSQL's defaults: fsync=on, synchronous_commit=on, full_page_writes=on.
        self.process = subprocess.Popen(
            [self.bin / "postgres", "-D", self.dir / "data", "-p", str(self.port),
             "-k", self.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100"],
            user=self.user, env=env, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
        )
        deadline = time.time() + 30
        while subprocess.run(
            [self.bin / "pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-q"]
        ).returncode != 0:
            if self.process.poll() is not None or time.time() > deadline:
                sys.exit(f"bench-peers: PostgreSQL did not start: {(self.dir / 'postgres.log').read_text()}")
            time.sleep(0.1)
        with self.connect("postgres") as db:
            settings = dict(db.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'wal_level')"
            ).fetchall())
        assert settings["fsync"] == "on" and settings["synchronous_commit"] == "on", settings
        self.settings = settings
        self.version = subprocess.run(
            [self.bin / "postgres", "--version"], capture_output=True, text=True
        ).stdout.strip()

    def url(self, database):
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def connect(self, database):
        return psycopg.connect(self.url(database), autocommit=True)

    def create_database(self, name):
        with self.connect("postgres") as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name):
        with self.connect("postgres") as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}"')

    def checkpoint(self):
        with self.connect("postgres") as db:
            db.execute("CHECKPOINT")

    def cpu(self):
        return tree_cpu(self.process.pid)

    def stop(self):
        self.process.send_signal(signal.SIGINT)  # fast shutdown
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# tansu


class Tansu:
    def __init__(self, binary):
        self.binary = binary
        self.port = free_port()
        self.brokers = f"127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="bench-peers-tansu-", suffix=".log")[1])
        self.log = open(self.log_path, "ab")
        url = f"tcp://{self.brokers}"
        env = dict(os.environ, RUST_LOG=os.environ.get("TANSU_LOG", "warn"))
        for name in ("CLUSTER_ID", "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            env.pop(name, None)
        self.process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            env=env, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
        )
        self.version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
        admin = AdminClient({"bootstrap.servers": self.brokers, "log_level": 0})
        deadline = time.time() + 30
        while True:
            if self.process.poll() is not None:
                sys.exit(f"bench-peers: tansu exited: {self.log_path.read_text()}")
            try:
                if admin.list_topics(timeout=1).brokers:
                    break
            except Exception:
                pass
            if time.time() > deadline:
                sys.exit("bench-peers: tansu gave no metadata within 30 s")
            time.sleep(0.1)

    def create_topic(self, topic, partitions):
        admin = AdminClient({"bootstrap.servers": self.brokers})
        for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result(10)
        deadline = time.time() + 10
        while time.time() < deadline:
            metadata = admin.list_topics(topic, timeout=2).topics.get(topic)
            if metadata and metadata.error is None and len(metadata.partitions) == partitions and all(
                p.leader >= 0 for p in metadata.partitions.values()
            ):
                return
            time.sleep(0.05)
        sys.exit(f"bench-peers: tansu never showed {topic} with {partitions} led partitions")

    def cpu(self):
        return cpu_seconds(self.process.pid)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        self.log_path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# The workload


def produce(binary, brokers, topic, events, duplicates, run_id):
    out = subprocess.run(
        [binary, "produce", "--brokers", brokers, "--topic", topic, "--events", str(events),
         "--duplicates", str(duplicates), "--malformed", "0", "--run-id", run_id],
        capture_output=True, text=True, check=True,
    ).stdout
    line = next(l for l in out.splitlines() if l.startswith("produced:"))
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    return {k: fields[k] for k in ("total", "unique_valid", "republished", "failed", "seconds")}


def read_topic(brokers, topic, partitions, expected_total):
    """Every record from the beginning to the end of each partition: the ends (the next offset
    to be written) and the unique events (first occurrence per id). Read with fetches, not
    ListOffsets (tansu 0.6 answers that with the last batch's base offset + 1)."""
    deadline = time.time() + 60
    while True:
        consumer = Consumer({
            "bootstrap.servers": brokers, "group.id": f"bench-peers-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        })
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ends = [0] * partitions
        at_end = [False] * partitions
        events, records = {}, 0
        while not all(at_end):
            for message in consumer.consume(10000, 1.0):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        at_end[message.partition()] = True
                        continue
                    sys.exit(f"bench-peers: reading {topic}: {message.error()}")
                records += 1
                ends[message.partition()] = message.offset() + 1
                value = json.loads(message.value())
                events.setdefault(value["event_id"], value)
        consumer.close()
        if records >= expected_total:
            return ends, events, records
        if time.time() > deadline:
            sys.exit(f"bench-peers: {topic} holds {records} records, the producer was acknowledged {expected_total}")
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# One consumer's run


class Reports:
    """The JSON lines a peer prints on stdout."""

    def __init__(self, stream):
        self.values = {}
        self.first = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            self.values.update(value)
            if "first_record_at" in value:
                self.first.set()


def committed_reader(brokers, group):
    return Consumer({"bootstrap.servers": brokers, "group.id": group, "enable.auto.commit": False})


def committed(reader, topic, partitions):
    try:
        tps = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=5)
    except Exception:
        return None
    return [tp.offset if tp.error is None else -1 for tp in tps]


def metrics_records(port):
    """The service's history_records_total over every partition and outcome, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            text = response.read().decode()
    except OSError:
        return None
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("history_records_total{"))


def start_consumer(kind, args, ctx, work, group, url, log):
    python = sys.executable
    if kind == "service":
        port = free_port()
        command = [
            ctx.binary, "run", "--brokers", ctx.brokers, "--topic", work.topic, "--group", group,
            "--database-url", url, "--admin-addr", f"127.0.0.1:{port}",
            "--kafka-option", f"session.timeout.ms={args.session_timeout_ms}",
        ] + [f"--commit-interval={args.commit_interval}s"] * (args.commit_interval is not None)
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        return [process], port
    script = {"framework": "quix_inbox.py", "framework-scaled": "quix_inbox.py",
              "per-record": "per_record.py"}[kind]
    command = [python, str(HERE / script), "--brokers", ctx.brokers, "--topic", work.topic,
               "--group", group, "--database-url", url,
               "--session-timeout-ms", str(args.session_timeout_ms)]
    if kind.startswith("framework"):
        command += ["--commit-interval", str(args.framework_commit_interval),
                    "--poll-timeout", str(args.framework_poll_timeout)]
    elif args.commit_interval is not None:
        command += ["--commit-interval-ms", str(int(args.commit_interval * 1000))]
    # framework-scaled: one Quix Streams process per partition in the group, as a team scales
    # a Quix application out.
    instances = ctx.partitions if kind == "framework-scaled" else 1
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                                  stdin=subprocess.DEVNULL, text=True, cwd=HERE)
                 for _ in range(instances)]
    return processes, [Reports(p.stdout) for p in processes]


def stop_process(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_one(kind, round_no, order, args, ctx, work):
    name = f"peers_{kind.replace('-', '_')}_{round_no}"
    ctx.pg.drop_database(name)
    url = ctx.pg.create_database(name)
    subprocess.run([ctx.binary, "migrate", "--database-url", url], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx.pg.checkpoint()  # every run starts without the previous one's dirty pages
    group = f"bench-peers-{kind}-{round_no}-{uuid.uuid4().hex[:6]}"
    reader = committed_reader(ctx.brokers, group)
    log_path = ctx.logs / f"{name}.log"
    log = open(log_path, "w")
    say(f"round {round_no}: {kind} (group {group})")
    processes, handle = start_consumer(kind, args, ctx, work, group, url, log)
    pids = [p.pid for p in processes]

    def exited():
        return next((p.returncode for p in processes if p.poll() is not None), None)
    try:
        # The first consumed record.
        deadline = time.time() + 120
        t0 = None
        while t0 is None:
            if exited() is not None:
                sys.exit(f"bench-peers: {kind} exited ({exited()}); see {log_path}")
            if time.time() > deadline:
                sys.exit(f"bench-peers: {kind} consumed nothing within 120 s; see {log_path}")
            if kind == "service":
                asked = time.time()
                if (metrics_records(handle) or 0) > 0:
                    t0 = asked
                else:
                    time.sleep(0.005)
            elif handle[0].first.wait(0.5) or any(h.first.is_set() for h in handle):
                t0 = min(h.values["first_record_at"] for h in handle if h.first.is_set())
        cpu0 = (sum(map(cpu_seconds, pids)), ctx.pg.cpu(), ctx.tansu.cpu(), time.time())
        # Committed offsets reaching every partition's end.
        last_progress, last_sum, end = time.time(), -1, None
        while end is None:
            offsets = committed(reader, work.topic, ctx.partitions)
            now = time.time()
            if offsets and all(o >= e for o, e in zip(offsets, work.ends)):
                end = now
                break
            total = sum(max(o, 0) for o in offsets or [])
            if total != last_sum:
                last_sum, last_progress = total, now
            if now - last_progress > args.stall_seconds:
                sys.exit(f"bench-peers: {kind}'s committed offsets {offsets} stood still for "
                         f"{args.stall_seconds} s short of {work.ends}; see {log_path}")
            if exited() is not None:
                sys.exit(f"bench-peers: {kind} exited ({exited()}); see {log_path}")
            time.sleep(args.poll_ms / 1000)
        cpu1 = (sum(map(cpu_seconds, pids)), ctx.pg.cpu(), ctx.tansu.cpu(), time.time())
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            stop_process(process)
        reader.close()
        log.close()
    peer = {}
    if isinstance(handle, list):
        for h in handle:
            h.thread.join(5)
            for k, v in h.values.items():
                if k == "partitions":
                    peer.setdefault("instances", []).append(
                        {p: round(t - t0, 2) for p, t in sorted(v.items())})
                elif k not in ("ready", "first_record_at"):
                    peer[k] = round(peer.get(k, 0) + v, 3)
    seconds = end - t0
    wall = cpu1[3] - cpu0[3]
    check = verify(work, url)
    ctx.pg.drop_database(name)
    result = {
        "kind": kind, "round": round_no, "order": order, "records": work.records,
        "unique": len(work.events), "seconds": seconds, "rate": work.records / seconds,
        "cpu_process": (cpu1[0] - cpu0[0]) / wall, "cpu_pg": (cpu1[1] - cpu0[1]) / wall,
        "cpu_tansu": (cpu1[2] - cpu0[2]) / wall,
        "us_per_event": (cpu1[0] - cpu0[0]) / work.records * 1e6,
        "peer": peer,
        **check,
    }
    say(f"  {kind}: {work.records} records in {seconds:.2f} s = {result['rate']:,.0f}/s, "
        f"rows {check['history_rows']} of {len(work.events)} unique, {check['verdict']} {peer or ''}")
    if check["verdict"] != "exact":
        sys.exit(f"bench-peers: {kind}'s rows do not equal the unique events: {check}")
    return result


def verify(work, url):
    """Exactly one inbox marker and one history row per unique event, with its payload."""
    with psycopg.connect(url, autocommit=True) as db:
        inbox = {r[0] for r in db.execute("SELECT event_id FROM inbox")}
        rows = db.execute(
            "SELECT event_id, ticket_id, from_status, to_status, changed_at FROM history_events"
        ).fetchall()
    history = {r[0]: r for r in rows}
    wrong = 0
    for event_id, ticket, from_status, to_status, changed_at in rows:
        want = work.events.get(event_id)
        if (
            want is None
            or (ticket, from_status, to_status) != (want["ticket_id"], want["from_status"], want["to_status"])
            or changed_at != dt.datetime.fromisoformat(want["changed_at"])
        ):
            wrong += 1
    expected = set(work.events)
    exact = inbox == expected and set(history) == expected and len(rows) == len(expected) and wrong == 0
    return {
        "inbox_rows": len(inbox), "history_rows": len(rows), "wrong_rows": wrong,
        "missing": len(expected - set(history)), "verdict": "exact" if exact else "MISMATCH",
    }


# ---------------------------------------------------------------------------------------------
# Report


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return f"{os.cpu_count()} cores, {model}, {mem_kb / 1024 / 1024:.1f} GiB memory, Linux {platform.release()}"


def load():
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def render(results, ctx, args):
    lines = []
    started = ctx.started.strftime("%Y-%m-%d %H:%M UTC")
    lines.append("## Beside the peers, from outside (scripts/bench-peers)\n")
    lines.append(
        f"Written by `scripts/bench-peers --write` on {started} from one run; the tables of "
        "`history-consumer bench` above are another run (the embedded mock broker), so compare "
        "numbers within this section only.\n"
    )
    lines.append(f"- Machine: {machine()}")
    lines.append(f"- PostgreSQL: `{ctx.pg.version}`, one throwaway cluster (initdb in a temporary "
                 f"directory), PostgreSQL's default settings: fsync={ctx.pg.settings['fsync']}, "
                 f"synchronous_commit={ctx.pg.settings['synchronous_commit']}, "
                 f"full_page_writes={ctx.pg.settings['full_page_writes']}, shared_buffers "
                 f"{int(ctx.pg.settings['shared_buffers']) * 8 // 1024} MB; a fresh database per "
                 "consumer and round, migrated by `history-consumer migrate`")
    lines.append(f"- Kafka: `{ctx.tansu.version}` (memory:// storage) as a server of its own on "
                 "loopback; the consumers, the broker and PostgreSQL share the cores")
    lines.append(f"- Python {platform.python_version()}, Quix Streams, psycopg and confluent-kafka "
                 "as pinned in benchmarks/peers/requirements.txt (confluent-kafka 2.12.2 bundles "
                 "librdkafka 2.12, the service's rdkafka 0.39 too)")
    lines.append(f"- Load average (1 / 5 / 15 min): {ctx.load_start} when the run started, "
                 f"{load()} when it ended. The machine is shared: compare ratios within the run.\n")
    lines.append("Command:\n")
    lines.append("```sh\n" + ctx.command + "\n```\n")
    lines.append(
        f"The workload: `history-consumer produce` published {ctx.work.records:,} records once "
        f"({ctx.work.produced['republished']} republished copies of earlier events, "
        f"{len(ctx.work.events):,} unique events, no malformed ones) over {ctx.partitions} "
        "partitions, keyed by ticket, before any consumer started; every consumer reads that "
        "same topic from the beginning in a consumer group of its own into a fresh database"
        + ("" if ctx.small is ctx.work else
           f", except the per-record consumer, which reads a topic of its own of "
           f"{ctx.small.records:,} records of the same mix ({len(ctx.small.events):,} unique; "
           "one transaction per record does not depend on how many there are, and the whole "
           "workload would take it many minutes)")
        + ". "
        "Time runs from the consumer's first record (the peers print when their first record "
        "arrives; the service's first is seen on its /metrics, polled every 5 ms, as "
        "`history_records_total` turning non-zero, i.e. at most one batch's transaction after "
        "its first fetch) to the group's committed offsets, read from the broker every "
        f"{args.poll_ms} ms with confluent-kafka's `committed()`, reaching the end of every "
        "partition. events/s = records / seconds. Each run then checks that the database holds "
        "exactly one inbox marker and one history row per unique event, with its payload. CPU: "
        "user + system time of the consumer's process, of PostgreSQL (postmaster and backends) "
        "and of tansu over the same window, in cores.\n"
    )
    ci = f"{args.commit_interval:g} s" if args.commit_interval is not None else "1 s (its default)"
    lines.append("The consumers and their settings:\n")
    lines.append(
        "- **service**: `target/release/history-consumer run` with production defaults (batch "
        "256, linger 2 ms, 16 connections, offsets committed every "
        f"{ci}), only `session.timeout.ms={args.session_timeout_ms}` added (tansu holds "
        "every JoinGroup for half the session timeout; it does not touch throughput)."
    )
    lines.append(
        "- **framework**: Quix Streams 3.28.1 (`benchmarks/peers/quix_inbox.py`), one "
        "Application process: a StreamingDataFrame (JSON values) into a `BatchingSink` whose "
        "`write()` is the service's batch transaction (one multi-row inbox insert ON CONFLICT "
        "DO NOTHING RETURNING event_id, one multi-row history insert for the returned ids, one "
        "commit) on one psycopg 3 connection. Quix flushes one batch per partition at each "
        f"checkpoint, every `commit_interval` = {args.framework_commit_interval:g} s, and commits "
        "the offsets after every write succeeded (at-least-once). So the batch is whatever "
        "arrived in one interval (about rate × interval / partitions records). "
        f"`consumer_poll_timeout` = {args.framework_poll_timeout:g} s instead of 1 s, so that the "
        "last checkpoint is not held by an idle poll; no state, no changelog topics."
    )
    lines.append(
        "- **per-record**: `benchmarks/peers/per_record.py`, confluent-kafka's Consumer and one "
        "psycopg 3 connection; per record: begin, inbox insert ON CONFLICT DO NOTHING "
        "RETURNING, the history row only for a new marker (else rollback), commit, then "
        "`store_offsets`; librdkafka auto-commits stored offsets every "
        f"{(args.commit_interval or 1.0) * 1000:g} ms."
    )
    if any(r["kind"] == "framework-scaled" for r in results):
        lines.append(
            f"- **framework-scaled**: the framework peer as {ctx.partitions} processes in one "
            "consumer group (one per partition: how a Quix Streams application scales out), "
            "each with its own connection; CPU summed over them."
        )
    lines.append("")
    lines.append("| round | ran | consumer | records (unique) | seconds | events/s | CPU cores: consumer + PostgreSQL + tansu | consumer CPU µs per event | rows |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        lines.append(
            f"| {r['round']} | {r['order']} | {r['kind']} | {r['records']:,} ({r['unique']:,}) | "
            f"{r['seconds']:.2f} | {r['rate']:,.0f} | {r['cpu_process']:.2f} + {r['cpu_pg']:.2f} + "
            f"{r['cpu_tansu']:.2f} | {r['us_per_event']:.1f} | {r['verdict']} |"
        )
    lines.append("")
    peers = [k for k in KINDS[1:] if any(r["kind"] == k for r in results)]
    ratios = ratio_rows(results, peers)
    if ratios and peers:
        lines.append("| round | " + " | ".join(f"service / {k}" for k in peers) + " |")
        lines.append("|---" * (len(peers) + 1) + "|")
        for round_no, values in ratios:
            lines.append(f"| {round_no} | " + " | ".join(fmt(values[k]) for k in peers) + " |")
        lines.append("")
        lines.append("| target | this run (median of the rounds' ratios) | goal | |")
        lines.append("|---|---|---|---|")
        for kind, label, goal in (("framework", "service / framework peer", 2.6),
                                  ("per-record", "service / per-record consumer", 50)):
            got = [values[kind] for _, values in ratios if values.get(kind)]
            if got:
                m = statistics.median(got)
                lines.append(f"| {label} | {m:.2f} | ≥ {goal:g} | {'met' if m >= goal else 'MISSED'} |")
        lines.append("")
    return "\n".join(lines)


def fmt(x):
    return "—" if x is None else f"{x:.2f}"


def ratio_rows(results, peers):
    """Per round: the service's events/s over each peer's, in that round."""
    rows = []
    for round_no in sorted({r["round"] for r in results}):
        by = {r["kind"]: r["rate"] for r in results if r["round"] == round_no}
        if "service" in by:
            rows.append((round_no, {k: by["service"] / by[k] if k in by else None for k in peers}))
    return rows


def write_section(path, section, notes_text):
    """Puts the section between its markers below the hand-written notes' marker (or at the end
    of the file). Hand-written notes inside the section, below NOTES_START, are kept unless
    `notes_text` replaces them."""
    text = path.read_text() if path.exists() else ""
    kept = ""
    if SECTION_START in text and SECTION_END in text:
        before, rest = text.split(SECTION_START, 1)
        old, after = rest.split(SECTION_END, 1)
        if NOTES_START in old:
            kept = old.split(NOTES_START, 1)[1].strip("\n")
    else:
        if NOTES_MARKER not in text:
            text = text.rstrip("\n") + f"\n\n{NOTES_MARKER}\n"
        before, after = text.rstrip("\n") + "\n\n", ""
    notes = notes_text.strip("\n") if notes_text else kept
    block = f"{SECTION_START}\n\n{section.rstrip()}\n\n{NOTES_START}\n\n"
    if notes:
        block += notes + "\n\n"
    block += f"{SECTION_END}\n"
    path.write_text(before + block + after.lstrip("\n") if after.strip() else before + block)


# ---------------------------------------------------------------------------------------------


class Context:
    pass


def watchdog(pids, paths):
    """A shell that outlives us only long enough to stop `pids` and delete `paths` if this
    process dies without cleaning up (SIGKILL): no PostgreSQL or broker is left behind."""
    script = (
        'while kill -0 "$0" 2>/dev/null; do sleep 1; done; '
        'for pid in $1; do kill -INT "$pid" 2>/dev/null; done; sleep 5; '
        'for pid in $1; do kill -KILL "$pid" 2>/dev/null; done; rm -rf $2'
    )
    return subprocess.Popen(
        ["sh", "-c", script, str(os.getpid()), " ".join(map(str, pids)),
         " ".join(str(p) for p in paths)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class Workload:
    """One topic, published once: its ends and its unique events."""


def workload(args, ctx, events):
    work = Workload()
    work.topic = f"bench-peers-{uuid.uuid4().hex[:8]}"
    ctx.tansu.create_topic(work.topic, args.partitions)
    say(f"producing {events:,} records into {work.topic} on tansu {ctx.brokers}")
    work.produced = produce(args.binary, ctx.brokers, work.topic, events, args.duplicates,
                            uuid.uuid4().hex[:8])
    if int(work.produced["failed"]):
        sys.exit(f"bench-peers: the producer failed records: {work.produced}")
    work.ends, work.events, work.records = read_topic(ctx.brokers, work.topic, args.partitions,
                                                      int(work.produced["total"]))
    say(f"{work.topic} ends at {work.ends}: {work.records:,} records, {len(work.events):,} "
        f"unique events (the producer: {work.produced['unique_valid']} unique)")
    if len(work.events) != int(work.produced["unique_valid"]):
        sys.exit("bench-peers: the topic's unique events differ from the producer's count")
    return work


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(REPO / "target/release/history-consumer"))
    parser.add_argument("--tansu", required=True, help="the tansu binary (scripts/install-tansu)")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--duplicates", type=float, default=0.10)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-record-events", type=int, default=20_000,
                        help="records of the per-record consumer's own topic (the same mix; at "
                             "one fsync per record the full workload would take many minutes)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="each consumer once per round; even rounds run in the reverse order")
    parser.add_argument("--only", default=",".join(DEFAULT_KINDS),
                        help=f"which consumers, comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--commit-interval", type=float, default=None,
                        help="seconds between offset commits for the service (--commit-interval) "
                             "and the per-record consumer (auto.commit.interval.ms); default: "
                             "the service's production default, 1 s, for both")
    parser.add_argument("--framework-commit-interval", type=float, default=1.0,
                        help="Quix Streams' commit_interval (its checkpoint, hence its batch)")
    parser.add_argument("--framework-poll-timeout", type=float, default=0.1,
                        help="Quix Streams' consumer_poll_timeout")
    parser.add_argument("--session-timeout-ms", type=int, default=10000)
    parser.add_argument("--poll-ms", type=int, default=20, help="committed-offset poll period")
    parser.add_argument("--stall-seconds", type=float, default=60)
    parser.add_argument("--write", action="store_true", help="write the section into --output")
    parser.add_argument("--output", default=str(REPO / "BENCHMARKS.md"))
    parser.add_argument("--notes", default=None,
                        help="a file of hand-written notes to put at the end of the section")
    parser.add_argument("--json", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    for k in kinds:
        if k not in KINDS:
            parser.error(f"--only: {k} is none of {', '.join(KINDS)}")
    if not os.access(args.binary, os.X_OK):
        parser.error(f"{args.binary} is missing: `cargo build --release` first")

    ctx = Context()
    ctx.binary = args.binary
    ctx.started = dt.datetime.now(dt.timezone.utc)
    ctx.load_start = load()
    ctx.command = re.sub(r"\s*--(tansu|binary|json)[= ]\S+", "",
                         "scripts/bench-peers " + " ".join(sys.argv[1:]))
    ctx.logs = Path(tempfile.mkdtemp(prefix="bench-peers-logs-"))
    # SIGTERM and SIGINT end the run through the `finally` below (consumers, broker and
    # PostgreSQL stopped, their directories removed).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench-peers: terminated"))
    ctx.pg = Postgres()
    try:
        ctx.tansu = Tansu(args.tansu)
    except BaseException:
        ctx.pg.stop()
        raise
    guard = watchdog([ctx.pg.process.pid, ctx.tansu.process.pid],
                     [ctx.pg.dir, ctx.tansu.log_path, ctx.logs])
    results = []
    try:
        ctx.brokers, ctx.partitions = ctx.tansu.brokers, args.partitions
        ctx.work = workload(args, ctx, args.events)
        ctx.small = ctx.work
        if "per-record" in kinds and args.per_record_events < args.events:
            ctx.small = workload(args, ctx, args.per_record_events)
        for round_no in range(1, args.rounds + 1):
            order = kinds if round_no % 2 else list(reversed(kinds))
            for position, kind in enumerate(order, 1):
                work = ctx.small if kind == "per-record" else ctx.work
                ordinal = ["1st", "2nd", "3rd"][position - 1] if position <= 3 else f"{position}th"
                results.append(run_one(kind, round_no, ordinal, args, ctx, work))
    finally:
        ctx.tansu.stop()
        ctx.pg.stop()
        guard.kill()
        guard.wait()
    section = render(results, ctx, args)
    print(section)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "load_start": ctx.load_start,
                                               "load_end": load()}, indent=2))
    if args.write:
        notes = Path(args.notes).read_text() if args.notes else ""
        write_section(Path(args.output), section, notes)
        say(f"wrote the bench-peers section of {args.output}")
    shutil.rmtree(ctx.logs, ignore_errors=True)


if __name__ == "__main__":
    main()
