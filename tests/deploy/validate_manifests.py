"""Checks deploy/kubernetes: every kustomization renders, every rendered object is valid against
the Kubernetes API schemas (kubernetes-validate, strict: an unknown or misspelt field fails), and
the manifests agree with the image and the daemon where a schema cannot see it: ports, the user,
probes on convoyd's gRPC health, the drain timeout against the grace period, the config's
listening addresses, the autoscaler's metric against docs/metrics.md and the adapter rule.

    python validate_manifests.py REPO_ROOT

Run by tests/deploy/manifests_test.sh in the venv of scripts/test-venv.sh. Prints one line per
failure and exits 1 when there is any.
"""

import difflib
import os
import re
import shutil
import subprocess
import sys

import kubernetes_validate
import yaml
from kubernetes_validate import utils as kv_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kustomize_render  # noqa: E402

# The oldest Kubernetes the manifests are meant for (gRPC probes are GA from 1.27; autoscaling/v2
# and policy/v1 are older) and the newest this kubernetes-validate knows.
KUBERNETES_VERSIONS = ["1.27.0", kv_utils.latest_version()]
KUSTOMIZATIONS = ["base", "overlays/cpu", "overlays/gpu"]
EXPECTED_KINDS = {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget",
                  "HorizontalPodAutoscaler"}
CONFIG_KEY = "convoy.pbtxt"
# Lines (without comments) an overlay's config may change from the base's, by overlay.
OVERLAY_CONFIG_CHANGES = {"overlays/cpu": {"cpu_threads"}, "overlays/gpu": {"device"}}

errors = []


def error(where, message):
    errors.append(f"{where}: {message}")


def pbtxt_fields(text):
    """The `name: value` lines of a protobuf text file, comments dropped, as (section, name, value)."""
    fields = []
    section = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        for token in re.findall(r'[A-Za-z_]+\s*\{|\}|[A-Za-z_]+\s*:\s*"[^"]*"|[A-Za-z_]+\s*:\s*[^\s{}]+', line):
            if token.endswith("{"):
                section.append(token[:-1].strip())
            elif token == "}":
                section.pop()
            else:
                name, value = (part.strip() for part in token.split(":", 1))
                fields.append((".".join(section), name, value.strip('"')))
    return fields


def pbtxt_value(text, section, name):
    values = [v for s, n, v in pbtxt_fields(text) if s == section and n == name]
    return values[0] if len(values) == 1 else None


def validate_schema(where, obj):
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            error(where, f"invalid for Kubernetes {version}: {path}: {e.message}")
        except kv_utils.SchemaNotFoundError as e:
            error(where, f"no schema for Kubernetes {version}: {e.message}")


def check_rendered(name, objects, repo, image):
    where = f"deploy/kubernetes/{name}"
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
        validate_schema(f"{where}: {obj['kind']} {obj['metadata']['name']}", obj)
    if set(by_kind) != EXPECTED_KINDS or any(len(v) != 1 for v in by_kind.values()):
        error(where, f"renders {sorted((k, len(v)) for k, v in by_kind.items())}, expected one each "
              f"of {sorted(EXPECTED_KINDS)}")
        return
    deployment, service = by_kind["Deployment"][0], by_kind["Service"][0]
    pdb, hpa, config_map = (by_kind[k][0] for k in ("PodDisruptionBudget",
                                                   "HorizontalPodAutoscaler", "ConfigMap"))
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    containers = [c for c in spec["containers"] if c["name"] == "convoyd"]
    if len(containers) != 1:
        error(where, "the Deployment has no container named convoyd")
        return
    container = containers[0]
    config = config_map.get("data", {}).get(CONFIG_KEY)
    if config is None:
        error(where, f"the ConfigMap {config_map['metadata']['name']} has no {CONFIG_KEY}")
        return

    # The config: mounted from this ConfigMap, named by --config, listening where the ports say.
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = [m for m in container.get("volumeMounts", [])
              if volumes.get(m["name"], {}).get("configMap", {}).get("name") == config_map["metadata"]["name"]]
    args = container.get("command", []) + container.get("args", [])
    config_args = [a.split("=", 1)[1] for a in args if a.startswith("--config=")]
    if len(mounts) != 1 or config_args != [f"{mounts[0]['mountPath']}/{CONFIG_KEY}"]:
        error(where, f"convoyd's --config {config_args} is not {CONFIG_KEY} of the mounted ConfigMap "
              f"{config_map['metadata']['name']}")
    # convoyd listens on 127.0.0.1 by default: a pod must opt in to every interface, for all three.
    for section, field in (("frontend", "listen_address"), ("frontend", "http_listen_address"),
                           ("metrics", "listen_address")):
        address = pbtxt_value(config, section, field)
        if address != "0.0.0.0":
            error(where, f"the config's {section}.{field} is {address!r}: a pod must say "
                  "\"0.0.0.0\" explicitly (its loopback is unreachable from the Service)")
    config_ports = {"grpc": pbtxt_value(config, "frontend", "port"),
                    "metrics": pbtxt_value(config, "metrics", "port")}

    # Ports: the container's, the Service's, the image's EXPOSE and the config's agree.
    container_ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    service_ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    wanted = {"grpc": 50051, "http": 8000, "metrics": 8002}
    if container_ports != wanted or service_ports != wanted:
        error(where, f"ports: container {container_ports}, Service {service_ports}, expected {wanted}")
    if set(wanted.values()) != image["exposed"]:
        error(where, f"the image EXPOSEs {sorted(image['exposed'])}, the manifests {sorted(wanted.values())}")
    for port_name, value in config_ports.items():
        if value != str(wanted[port_name]):
            error(where, f"the config's {port_name} port is {value}, the container's {wanted[port_name]}")
    for port in service["spec"]["ports"]:
        if port.get("targetPort") not in container_ports and port.get("targetPort") not in container_ports.values():
            error(where, f"the Service's port {port['name']} targets {port.get('targetPort')}, "
                  "which the container does not have")

    # Selectors and references.
    labels = pod["metadata"].get("labels", {})
    for what, selector in (("Deployment", deployment["spec"]["selector"]["matchLabels"]),
                           ("Service", service["spec"]["selector"]),
                           ("PodDisruptionBudget", pdb["spec"]["selector"]["matchLabels"])):
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            error(where, f"the {what} selector {selector} does not select the pods ({labels})")
    target = hpa["spec"]["scaleTargetRef"]
    if (target["kind"], target["name"]) != ("Deployment", deployment["metadata"]["name"]):
        error(where, f"the autoscaler scales {target['kind']} {target['name']}, not the Deployment "
              f"{deployment['metadata']['name']}")
    if "replicas" in deployment["spec"]:
        error(where, "the Deployment sets replicas, which would undo the autoscaler on every apply")

    # Probes on convoyd's gRPC health; liveness that a drain does not fail.
    for probe in ("startupProbe", "readinessProbe"):
        grpc_port = container.get(probe, {}).get("grpc", {}).get("port")
        if grpc_port != wanted["grpc"]:
            error(where, f"the {probe} is not a gRPC health probe on port {wanted['grpc']}")
    if "livenessProbe" not in container:
        error(where, "the container has no livenessProbe")
    elif "grpc" in container["livenessProbe"]:
        error(where, "the livenessProbe asks gRPC health, which says NOT_SERVING while convoyd "
              "drains: a drain would restart the pod")

    # Termination: the grace period covers the preStop pause and convoyd's drain.
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    command = pre_stop.get("exec", {}).get("command", [])
    pause = int(command[1]) if len(command) == 2 and command[0] == "sleep" else None
    if pause is None:
        error(where, f"the preStop hook {pre_stop} is not a `sleep N` pause")
        pause = 0
    drain = pbtxt_value(config, "frontend", "drain_timeout_microseconds")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if drain is None:
        error(where, "the config does not set frontend.drain_timeout_microseconds")
    elif grace <= pause + int(drain) / 1e6:
        error(where, f"terminationGracePeriodSeconds {grace} is not longer than the preStop pause "
              f"({pause} s) plus the drain timeout ({int(drain) / 1e6:g} s)")

    # Security: the image's user, non-root, read-only root.
    pod_security = spec.get("securityContext", {})
    security = container.get("securityContext", {})
    if pod_security.get("runAsNonRoot") is not True or security.get("readOnlyRootFilesystem") is not True:
        error(where, "the pod must set runAsNonRoot and the container readOnlyRootFilesystem")
    if pod_security.get("runAsUser") != image["uid"]:
        error(where, f"runAsUser {pod_security.get('runAsUser')} is not the image's user {image['uid']}")
    if security.get("allowPrivilegeEscalation") is not False:
        error(where, "the container must set allowPrivilegeEscalation: false")

    # The autoscaler's metric is convoy's queue depth, as docs/metrics.md names it.
    metrics = hpa["spec"].get("metrics", [])
    names = [m.get("pods", {}).get("metric", {}).get("name") for m in metrics if m.get("type") == "Pods"]
    if names != [image["queue_metric"]]:
        error(where, f"the autoscaler's Pods metrics are {names}, expected [{image['queue_metric']!r}]")

    # Overlay specifics.
    resources = container.get("resources", {})
    if name == "overlays/gpu":
        if str(resources.get("limits", {}).get("nvidia.com/gpu")) != "1":
            error(where, "the GPU overlay must ask for nvidia.com/gpu: 1")
        if not any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])):
            error(where, "the GPU overlay must tolerate the nvidia.com/gpu taint")
        if pbtxt_value(config, "executor", "device") != "CUDA":
            error(where, "the GPU overlay's config must require device: CUDA")
    if name == "overlays/cpu":
        threads = pbtxt_value(config, "executor", "cpu_threads")
        limit = str(resources.get("limits", {}).get("cpu"))
        if threads != limit:
            error(where, f"the config's cpu_threads ({threads}) is not the container's CPU limit ({limit})")
    return config


def image_facts(repo):
    """What docker/Dockerfile and docs/metrics.md say that the manifests must agree with."""
    dockerfile = open(os.path.join(repo, "docker/Dockerfile")).read()
    user = re.search(r"^USER\s+(\d+)", dockerfile, re.M)
    exposed = {int(p) for line in re.findall(r"^EXPOSE\s+(.*)$", dockerfile, re.M)
               for p in line.split()}
    metrics_doc = open(os.path.join(repo, "docs/metrics.md")).read()
    if "`convoy_num_requests_waiting`" not in metrics_doc:
        error("docs/metrics.md", "no longer lists convoy_num_requests_waiting, the autoscaler's metric")
    if not user:
        error("docker/Dockerfile", "has no numeric USER")
    return {"uid": int(user.group(1)) if user else None, "exposed": exposed,
            "queue_metric": "convoy_num_requests_waiting"}


def check_configs(repo, deploy):
    """The base's config is the image's; an overlay's differs only in the lines it is for."""
    image_config = open(os.path.join(repo, "configs/docker.pbtxt")).read()
    base_config = open(os.path.join(deploy, "base", CONFIG_KEY)).read()
    if base_config != image_config:
        diff = "\n".join(difflib.unified_diff(image_config.splitlines(), base_config.splitlines(),
                                              "configs/docker.pbtxt", "base/convoy.pbtxt", lineterm=""))
        error("deploy/kubernetes/base/convoy.pbtxt", f"differs from configs/docker.pbtxt:\n{diff}")
    base = set(pbtxt_fields(base_config))
    for overlay, allowed in OVERLAY_CONFIG_CHANGES.items():
        fields = set(pbtxt_fields(open(os.path.join(deploy, overlay, CONFIG_KEY)).read()))
        changed = {n for _, n, _ in base ^ fields}
        if not changed <= allowed:
            error(f"deploy/kubernetes/{overlay}/{CONFIG_KEY}",
                  f"changes {sorted(changed)} from the base's config; only {sorted(allowed)} may differ")


def check_adapter_rule(deploy, metric):
    path = os.path.join(deploy, "examples/prometheus-adapter-values.yaml")
    values = yaml.safe_load(open(path))
    rules = values.get("rules", {}).get("custom", [])
    served = [r.get("name", {}).get("as") for r in rules]
    queried = [r.get("seriesQuery", "") for r in rules]
    if metric not in served or not any(q.startswith(metric + "{") for q in queried):
        error(path, f"no rule serves {metric} (rules serve {served})")


def compare_with_kubectl(name, directory, objects):
    """Where kubectl is installed, its kustomize must render exactly what our renderer does."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    result = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True)
    if result.returncode != 0:
        error(f"deploy/kubernetes/{name}", f"kubectl kustomize failed: {result.stderr.strip()}")
        return kubectl
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(result.stdout) if o}
    ours = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    if theirs != ours:
        differing = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        error(f"deploy/kubernetes/{name}", f"tests/deploy/kustomize_render.py and kubectl kustomize "
              f"render {differing} differently")
    return kubectl


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} REPO_ROOT")
    repo = os.path.abspath(sys.argv[1])
    deploy = os.path.join(repo, "deploy/kubernetes")
    image = image_facts(repo)
    check_configs(repo, deploy)
    check_adapter_rule(deploy, image["queue_metric"])
    kubectl = None
    for name in KUSTOMIZATIONS:
        directory = os.path.join(deploy, name)
        try:
            objects = kustomize_render.render(directory)
        except (kustomize_render.RenderError, OSError, KeyError) as e:
            error(f"deploy/kubernetes/{name}", f"does not render: {e}")
            continue
        check_rendered(name, objects, repo, image)
        kubectl = compare_with_kubectl(name, directory, objects) or kubectl
        print(f"rendered deploy/kubernetes/{name}: "
              + ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in objects))
    print(f"validated against Kubernetes {' and '.join(KUBERNETES_VERSIONS)} "
          f"(kubernetes-validate {kubernetes_validate.__version__}, strict)")
    print("renderer cross-checked with " + (f"{kubectl} kustomize" if kubectl else
                                            "nothing: kubectl is not installed here"))
    for e in errors:
        print(f"FAILED: {e}")
    if errors:
        sys.exit(1)
    print("PASSED")


if __name__ == "__main__":
    main()
