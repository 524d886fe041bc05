# The collector: FastAPI on uvicorn over one DuckDB file; no torch.
#   docker build -f deploy/docker/collector.Dockerfile -t flopfleet-collector .
#   docker run --rm -p 8000:8000 -v flopfleet-data:/data flopfleet-collector
#   docker run --rm -v flopfleet-data:/data flopfleet-collector token create --db /data/flopfleet.duckdb --name agents
FROM python:3.12-slim

WORKDIR /opt/flopfleet
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY schemas ./schemas
COPY collector ./collector
RUN python -m pip install --no-cache-dir ".[collector]" \
 && python -c "import collector.web.server, duckdb; print('flopfleet-collector on duckdb', duckdb.__version__)" \
 && useradd --system --uid 10001 --home-dir /data flopfleet && mkdir -p /data && chown flopfleet /data

USER flopfleet
ENV PYTHONUNBUFFERED=1
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=3)"
ENTRYPOINT ["flopfleet-collector"]
CMD ["serve", "--db", "/data/flopfleet.duckdb", "--host", "0.0.0.0", "--port", "8000"]
