# syntax=docker/dockerfile:1
# rlproxy: a static binary on distroless, running as nonroot (uid 65532).
#   docker build --build-arg VERSION=$(git describe --tags --always) -t rlproxy .
#   docker run -p 8080:8080 -v $PWD/rlproxy.yaml:/etc/rlproxy/rlproxy.yaml:ro rlproxy

FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO off: a static binary for an image with no libc. -trimpath keeps build
# paths out of the binary; -s -w drop the symbol and DWARF tables.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rlproxy ./cmd/rlproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rlproxy /rlproxy
USER nonroot
# 8080: the proxy (listen); 9090: /metrics, /healthz, /readyz (admin_listen).
EXPOSE 8080 9090
ENTRYPOINT ["/rlproxy"]
CMD ["-config", "/etc/rlproxy/rlproxy.yaml"]
