"""The HTTP API (FastAPI): HumanLayer's routes under /humanlayer/v1 plus extensions."""
