# One image, two static binaries on distroless (non-root, uid 65532):
#   /manager  the operator (package main at the repository root)
#   /dorylus  the data plane (graph-server, param-server, function, ...),
#             which the operator runs in every job pod.
#   /datasets the builtin datasets of spec.dataset.builtin (DORYLUS_DATA_DIR)
# `make image` writes the same image without Docker (hack/image); a test in
# hack/image keeps the two in step (files, user, entrypoint, environment).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w -buildid=" -o /out/manager . && \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w -buildid=" -o /out/dorylus ./runtime/dorylus

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/dorylus /dorylus
COPY datasets/cora /datasets/cora
COPY datasets/citeseer /datasets/citeseer
COPY datasets/amazon_computers /datasets/amazon_computers
COPY datasets/coauthor_cs /datasets/coauthor_cs
ENV PATH=/ DORYLUS_DATA_DIR=/datasets
WORKDIR /
USER 65532:65532
ENTRYPOINT ["/manager"]
