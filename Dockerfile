# syntax=docker/dockerfile:1
# rlproxy: a static binary on distroless, running as nonroot (uid 65532).
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) --build-arg DATE=$(date -u +%FT%TZ) -t rlproxy .
#   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 \
#     -v $PWD/configs/rlproxy.yaml:/etc/rlproxy/rlproxy.yaml:ro rlproxy
# The image listens on :8080 and :9090 (flags over the file's listen and
# admin_listen, which usually name loopback), so both are reachable through
# the published ports; publish 9090 on the host's loopback only.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
# CGO off: a static binary for an image with no libc. -trimpath keeps build
# paths out of the binary; -s -w drop the symbol and DWARF tables.
# The state directory (tls.acme's certificates), for the final image.
RUN install -d -m 0700 /out/state
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" -o /out/rlproxy ./cmd/rlproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rlproxy /rlproxy
# Owned by nonroot: a volume mounted at /var/lib/rlproxy starts with this
# owner, where a directory the engine creates would belong to root.
COPY --from=build --chown=65532:65532 /out/state /var/lib/rlproxy
USER nonroot
# 8080: the proxy (listen); 9090: /metrics, /healthz, /readyz (admin_listen).
EXPOSE 8080 9090
ENTRYPOINT ["/rlproxy"]
CMD ["-config", "/etc/rlproxy/rlproxy.yaml", "-listen", ":8080", "-admin-listen", ":9090"]
