# One image, two static binaries on distroless (non-root, uid 65532):
#   /manager  the operator (package main at the repository root)
#   /dorylus  the data plane (graph-server, param-server, function, ...),
#             which the operator runs in every job pod.
# CI checks the same go build commands with `make build-operator`.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o /out/manager . && \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o /out/dorylus ./runtime/dorylus

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/dorylus /dorylus
USER 65532:65532
ENTRYPOINT ["/manager"]
