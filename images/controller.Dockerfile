# The codepod controller: `codepod serve` on a slim Debian, as a non-root user.
#
#   podman build -f images/controller.Dockerfile -t codepod:dev .     (from the repository root)
#   docker build -f images/controller.Dockerfile -t codepod:dev .
#
# The base images are build arguments (defaults: the public Debian images);
# `make images` passes a debootstrapped Debian imported into podman instead.
# `--target test` adds a stage that runs `codepod --version` in the image.
ARG BUILD_IMAGE=docker.io/library/debian:bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
# The libraries of the Makefile's PKGS, and the compilers of the pod helper:
# a static program for each architecture a pod may run on, so the build
# host's own gcc and the other architecture's cross compiler.
RUN cross=gcc-aarch64-linux-gnu\ libc6-dev-arm64-cross \
 && if [ "$(dpkg --print-architecture)" = arm64 ]; then \
      cross=gcc-x86-64-linux-gnu\ libc6-dev-amd64-cross; fi \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends build-essential pkg-config \
      libcurl4-openssl-dev libjansson-dev libwebsockets-dev libwebsockets-evlib-uv \
      libuv1-dev libyaml-dev libssl-dev libseccomp-dev libarchive-dev $cross >/dev/null \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY scripts/ scripts/
COPY tests/chart/get-helm.sh tests/chart/
COPY base/ base/
COPY store/ store/
COPY runner/ runner/
COPY k8s/ k8s/
COPY broker/ broker/
COPY cli/ cli/
# The binary only: no deps.sh (the packages above are what it needs to
# build), no tests (they run outside the image).
RUN mkdir -p /out && touch /out/.deps-ok \
 && make BUILD=/out /out/codepod && /out/codepod --version

FROM ${RUNTIME_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# Only the runtime libraries (libwebsockets' libuv event loop is a plugin of
# its own package), and the CA bundle for HTTPS brokers.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates libcurl4 libjansson4 \
      libwebsockets17 libwebsockets-evlib-uv libuv1 libyaml-0-2 libssl3 libseccomp2 \
      libarchive13 >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && groupadd --gid 10001 codepod \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin codepod
COPY --from=build /out/codepod /usr/local/bin/codepod
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/codepod", "serve"]
CMD ["--help"]

# make images builds this stage too: the binary starts in the image, with only
# the runtime libraries, as the non-root user.
FROM runtime AS test
RUN codepod --version && test "$(id -u)" = 10001 \
 && ! command -v cc && ! command -v make && test ! -e /usr/include/jansson.h
