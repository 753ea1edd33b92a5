# Hermes: one image for every service (`hermes ingest|router|llm|tools|delivery|all`)
# and the operator commands (`hermes migrate`, `hermes doctor`, ...).
# Migrations are embedded in the binary, so the image carries nothing else.
#
#   docker build -t hermes:dev .
#   docker run --rm hermes:dev hermes migrate

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release -p hermes --locked \
    && strip target/release/hermes

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="hermes" \
      org.opencontainers.image.description="Hermes message router: a queue-driven worker fleet (ingest, router, llm, tools, delivery)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="Hermes"
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 hermes \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin hermes
COPY --from=builder /src/target/release/hermes /usr/local/bin/hermes
USER 10001:10001
# MALLOC_ARENA_MAX=2: glibc's per-thread arenas otherwise grow ingest's RSS by ~10 MiB
# under load for no throughput gain (README, performance).
ENV HERMES_HTTP_ADDR=0.0.0.0:8080 \
    HERMES_ADMIN_ADDR=0.0.0.0:9090 \
    MALLOC_ARENA_MAX=2
EXPOSE 8080 9090
# No ENTRYPOINT: commands name the binary (`hermes migrate`, `hermes ingest`, ...),
# as compose.yaml and the health check (`hermes health`) do.
CMD ["hermes", "all"]
