# Hermes: one image for every service (`hermes ingest|router|llm|tools|delivery|discord-gateway|all`)
# and the operator commands (`hermes migrate`, `hermes doctor`, `hermes health`, ...).
# Migrations are embedded in the binary, so the image carries nothing else.
#
#   docker build -t hermes:dev .
#   docker run --rm hermes:dev hermes migrate
#
# Stages: `deps` compiles the dependencies against stub sources, so that layer is reused
# until Cargo.toml or Cargo.lock change; `build` compiles the workspace itself; the runtime
# is distroless (glibc, CA certificates, no shell, no package manager) running as non-root.
# No secret enters any stage: configuration comes from the environment at run time.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS deps
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY shared/types/Cargo.toml shared/types/
COPY shared/config/Cargo.toml shared/config/
COPY shared/telemetry/Cargo.toml shared/telemetry/
COPY shared/net/Cargo.toml shared/net/
COPY shared/db/Cargo.toml shared/db/
COPY shared/bus/Cargo.toml shared/bus/
COPY shared/cache/Cargo.toml shared/cache/
COPY shared/alerts/Cargo.toml shared/alerts/
COPY shared/runtime/Cargo.toml shared/runtime/
COPY shared/gateway/Cargo.toml shared/gateway/
COPY shared/media/Cargo.toml shared/media/
COPY shared/mcp_server/Cargo.toml shared/mcp_server/
COPY shared/operator/Cargo.toml shared/operator/
COPY shared/presence/Cargo.toml shared/presence/
COPY shared/channels/Cargo.toml shared/channels/
COPY shared/testkit_core/Cargo.toml shared/testkit_core/
COPY shared/testkit/Cargo.toml shared/testkit/
COPY services/ingest/Cargo.toml services/ingest/
COPY services/router/Cargo.toml services/router/
COPY services/llm/Cargo.toml services/llm/
COPY services/tools/Cargo.toml services/tools/
COPY services/delivery/Cargo.toml services/delivery/
COPY services/discord_gateway/Cargo.toml services/discord_gateway/
COPY services/hermes/Cargo.toml services/hermes/
COPY services/bench/Cargo.toml services/bench/
COPY tests/Cargo.toml tests/
# Empty crates in place of the workspace's: the build below compiles only the dependencies.
# The workspace's own artifacts are then deleted, so the real sources are always rebuilt
# (their files may be older than these stubs, and cargo compares modification times).
RUN for crate in shared/types shared/config shared/telemetry shared/net shared/db shared/bus shared/cache shared/alerts shared/runtime shared/gateway \
                 shared/media shared/mcp_server shared/operator shared/presence shared/channels shared/testkit_core shared/testkit \
                 services/ingest services/router services/llm services/tools \
                 services/delivery services/discord_gateway services/hermes services/bench tests; do \
        mkdir -p "$crate/src" && touch "$crate/src/lib.rs"; \
    done \
    && echo 'fn main() {}' > services/hermes/src/main.rs \
    && echo 'fn main() {}' > services/bench/src/main.rs \
    && mkdir -p tests/e2e && touch tests/e2e/main.rs \
    && cargo build --release --locked -p hermes \
    && rm -rf target/release/.fingerprint/hermes* target/release/deps/hermes* \
              target/release/deps/libhermes* target/release/hermes*

# Only `hermes`: the benchmarks are the separate `hermes-bench` binary, which the production
# image does not ship (`hermes bench` in it says so).
FROM deps AS build
COPY shared shared
COPY services services
COPY tests tests
COPY migrations migrations
RUN cargo build --release --locked -p hermes \
    && strip target/release/hermes

FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="hermes" \
      org.opencontainers.image.description="Hermes message router: a queue-driven worker fleet (ingest, router, llm, tools, delivery)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="Hermes"
COPY --from=build /src/target/release/hermes /usr/local/bin/hermes
# distroless' `nonroot` user; Kubernetes may run it as any other non-root id.
USER 65532:65532
# MALLOC_ARENA_MAX=2: glibc's per-thread arenas otherwise grow ingest's RSS by ~10 MiB
# under load for no throughput gain (README, performance).
ENV HERMES_HTTP_ADDR=0.0.0.0:8080 \
    HERMES_ADMIN_ADDR=0.0.0.0:9090 \
    MALLOC_ARENA_MAX=2
EXPOSE 8080 9090
# No shell in the image: the health check is the binary itself (`hermes health` GETs
# /readyz on 127.0.0.1:9090). Compose and Kubernetes define their own checks too.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["hermes", "health"]
# No ENTRYPOINT: commands name the binary (`hermes migrate`, `hermes ingest`, ...),
# as compose.yaml and the Kubernetes manifests do.
CMD ["hermes", "all"]
