# CPU image of the explainer, after Streamlit's deployment guide.
FROM python:3.11-slim

WORKDIR /app

RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*

COPY requirements.txt .
# The CPU build of torch first (about 200 MB instead of about 2.5 GB of CUDA libraries),
# then the rest of the pinned requirements; torch==2.13.0 is then already satisfied.
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements.txt

COPY . .

EXPOSE 8501

HEALTHCHECK CMD curl --fail http://localhost:8501/_stcore/health

# scripts.serve is `streamlit run app.py` with a warm-up that starts with the server (imports, and the
# Mitigations page's first numbers), so a fresh container's first visitor does not wait for them.
ENTRYPOINT ["python", "-m", "scripts.serve", "--server.port=8501", "--server.address=0.0.0.0"]
