#!/usr/bin/env bash
# The engine recipes (deploy/k8s/shard-job.yaml, deploy/github/shards.yml) validated offline
# against vendored JSON schemas (deploy/schemas/), and broken copies of them rejected (the
# check can fail). Cost: a few seconds (jsonschema and PyYAML in the shared venv).
source "$(dirname "$0")/../lib.sh"

VENV=target/py-venv
JSONSCHEMA=$(pin jsonschema)
PYYAML=$(pin pyyaml)
PIP_TIMEOUT=180 venv_with "$VENV" "$JSONSCHEMA" "$PYYAML"
timeout 60 "$VENV/bin/python" scripts/check_recipes.py --self-test
