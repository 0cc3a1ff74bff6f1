# The image the Docker (or Kubernetes) work pool runs flow runs in: the project's own files and pinned packages.
#   docker build -t mwpgen:latest .                       (--build-arg DVC_REMOTE=s3://bucket/mwpgen for S3)
# Its clone's DVC remote is DVC_REMOTE (default /remote: prefect.yaml mounts the shared remote folder there).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git default-jre-headless \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /mwpgen
COPY . .
ARG DVC_REMOTE=/remote
RUN bash scripts/setup.sh \
    && git init -q && git add -A && git -c user.name=mwpgen -c user.email=mwpgen@localhost commit -qm image \
    && .venv/bin/dvc remote modify --local storage url "$DVC_REMOTE"
ENV MWPGEN_HOME=/mwpgen VIRTUAL_ENV=/mwpgen/.venv PATH=/mwpgen/.venv/bin:$PATH HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1 MLFLOW_DISABLE_TELEMETRY=true
