# floe worker image for docker-compose.yml (the Temporal server and Postgres come from
# their own images). The Python environment (torch, transformers, tokenizers: the renderer
# the control worker uses, and the reference engine and trainer) comes from engine/setup.sh,
# and the built-in Qwen tokenizer folder is built at image build time (offline afterwards).
# The grading harness (the official swebench package, floe_harness) comes from harness/setup.sh.
FROM node:20-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv git patch \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/floe
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV FLOE_HOME=/var/lib/floe
RUN bash engine/setup.sh && bash harness/setup.sh \
    && /var/lib/floe/venv/bin/python -m floe_engine.build_tokenizer --out /var/lib/floe/tokenizers/qwen3.6 --template configs/templates/qwen3.jinja
ENTRYPOINT []
