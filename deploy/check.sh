#!/usr/bin/env bash
# Checks deploy/: the plain manifests (deploy/kubernetes) against the
# Kubernetes API schemas, offline, with kubernetes-validate from PyPI
# (installed into target/k8s-venv); the Helm chart rendered by a real helm
# and checked the same way, where helm is on PATH; and the image built,
# where a Docker daemon answers. What cannot run here is said, not failed.
set -euo pipefail
cd "$(dirname "$0")/.."

KV_VERSION=1.37.0
venv="${GPUSCOPE_K8S_VENV:-$PWD/target/k8s-venv}"
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$KV_VERSION"; then
  echo "deploy/check.sh: installing kubernetes-validate $KV_VERSION from PyPI into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi
validate() { "$venv/bin/kubernetes-validate" --strict --quiet "$@"; }

# The ServiceMonitor is a CRD the validator has no schema for: it warns
# and passes it; the built-in kinds are checked strictly.
validate deploy/kubernetes/*.yaml
echo "deploy/check.sh: deploy/kubernetes valid against the Kubernetes $KV_VERSION schemas"

if command -v helm >/dev/null; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  helm lint deploy/helm/gpuscope
  for values in "" "--set unprivileged=true --set serviceMonitor.enabled=false"; do
    # shellcheck disable=SC2086
    helm template gpuscope deploy/helm/gpuscope --namespace gpuscope $values >"$out/rendered.yaml"
    validate "$out/rendered.yaml"
  done
  echo "deploy/check.sh: the Helm chart renders valid objects"
else
  echo "deploy/check.sh: no helm here: the chart (deploy/helm/gpuscope) is not rendered; its objects mirror deploy/kubernetes"
fi

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
