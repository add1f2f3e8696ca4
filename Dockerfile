# floe worker image for docker-compose.yml (the Temporal server and Postgres come from
# their own images). Python + torch for the reference engine come from Debian.
FROM node:20-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-torch git patch \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/floe
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENTRYPOINT []
