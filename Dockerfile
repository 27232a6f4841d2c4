# One image for every process of the stack (architecture.md): directory-svc, router-svc, the
# engine simulator and kvctl, each started by its own `node dist/...` command (docker-compose.yml).
#
#   docker build -t kv-cache-router:local .
#   docker run --rm kv-cache-router:local node dist/directory-svc/main.js --help
#
# Two stages: the build stage has the dev dependencies (tsc) and a compiler toolchain in case a
# native module (zeromq, better-sqlite3) has no prebuilt binary for the platform; the runtime
# stage gets only production node_modules, dist/, proto/ and deploy/, and runs as a non-root user.

FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
# Lockfile first: the dependency layer is rebuilt only when dependencies change.
COPY package.json package-lock.json ./
# npm ci runs patch-package (postinstall), which applies patches/ to node_modules.
COPY patches ./patches
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY shared ./shared
COPY directory-svc ./directory-svc
COPY meta-svc ./meta-svc
COPY router-svc ./router-svc
COPY tools ./tools
RUN npx tsc -p tsconfig.build.json \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
# package.json carries "type": "module", which dist/*.js needs to load as ES modules.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The proto loader finds proto/ by walking up from dist/shared/view/ (shared/view/kvdirectory-proto.ts).
COPY proto ./proto
# Config files the compose services name (deploy/kv-events.compose.json, deploy/meta-config.json).
COPY deploy ./deploy
# The MetaService SQLite database and file storage live under /app/data (a volume in compose);
# the `node` user of the base image owns it and runs every process.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
# directory-svc gRPC / HTTP / MetaService, router-svc HTTP, simulated engine HTTP.
EXPOSE 50051 8889 6382 8888 8000
CMD ["node", "dist/directory-svc/main.js", "--help"]
