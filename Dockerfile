# The history consumer as a small image that runs as a non-root user.
#
#   docker build -t history-consumer .
#   docker run --rm history-consumer --help
#
# Stage 1 compiles the binary; librdkafka is built from source by rdkafka-sys, which needs a
# C toolchain, make, perl, and the headers of the libraries it links from Debian's packages:
# OpenSSL (TLS, SASL SCRAM), curl (OAUTHBEARER/OIDC token requests), zstd and zlib (the rust
# image has most of them already; they are listed so that the requirement is written down).
# Stage 2 holds the binary and the shared libraries it links: a Debian security update of
# OpenSSL or curl reaches the image by rebuilding it, without recompiling (docs/connecting.md).

FROM rust:1-bookworm AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc g++ make perl python3 pkg-config zlib1g-dev \
      libssl-dev libcurl4-openssl-dev libzstd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build

# Dependencies first, in a layer of their own: source edits do not rebuild librdkafka.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs \
 && cargo build --release --locked \
 && rm -rf src

# The templates and migrations are compiled into the binary.
COPY src src
COPY templates templates
COPY migrations migrations
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin history-consumer \
 && install -m 0755 target/release/history-consumer /usr/local/bin/history-consumer

FROM debian:bookworm-slim AS runtime
# The binary links OpenSSL, curl, zstd and zlib from Debian; ca-certificates is the system
# trust store that TLS to Kafka and PostgreSQL uses when no CA file is given.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libcurl4 libzstd1 zlib1g ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 history \
 && useradd --system --uid 10001 --gid history --no-create-home --shell /usr/sbin/nologin history
COPY --from=builder /usr/local/bin/history-consumer /usr/local/bin/history-consumer
USER 10001:10001
# The admin UI and /metrics with the health endpoints on ports of their own: publish 9100 to
# Prometheus and keep 8080 private (see docs/admin.md, "Admin surface and security").
ENV HISTORY_ADMIN_ADDR=0.0.0.0:8080 \
    HISTORY_METRICS_ADDR=0.0.0.0:9100
EXPOSE 8080 9100
ENTRYPOINT ["history-consumer"]
CMD ["run"]
