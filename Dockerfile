# phalanx: the gang scheduler (`phalanx serve`) and simulator.
#   docker build -t ghcr.io/phalanx-sched/phalanx:0.1.0 .
# Install manifests: `phalanx manifests | kubectl apply -f -`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp

# Only what the wheel build needs (see .dockerignore); the build backend is fetched into an
# isolated environment and not left in the image.
WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && rm -rf /build

WORKDIR /
# Numeric non-root user (no passwd entry needed); matches runAsUser in the Deployment.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["phalanx"]
CMD ["serve"]
