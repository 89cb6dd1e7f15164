"""Renders a kustomization as `kustomize build` does, for the subset deploy/kubernetes uses.

Debian 12 packages no kustomize, so the manifest test renders the overlays itself. Supported:
resources (files and kustomization directories), configMapGenerator (files; behavior create,
replace or merge; the content-hash name suffix), patches (strategic-merge files, matched by kind
and name), images (newName, newTag, digest), namePrefix, nameSuffix and labels (pairs,
includeSelectors, includeTemplates), with the name references that follow a rename (a ConfigMap in
a pod's volumes and environment, a Deployment in an autoscaler's scaleTargetRef). Anything else in
a kustomization is refused with its name, so that the renderer never silently renders less than
kustomize would. validate_manifests.py compares its output with `kubectl kustomize` wherever
kubectl is installed.

    python3 kustomize_render.py DIR      # prints the rendered YAML stream
"""

import copy
import hashlib
import json
import os
import sys

import yaml

SUPPORTED_FIELDS = {
    "apiVersion", "kind", "resources", "configMapGenerator", "generatorOptions", "patches",
    "images", "namePrefix", "nameSuffix", "labels",
}
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

# Strategic merge: the lists Kubernetes merges item by item, and the key that names an item.
# Every other list in a patch replaces the list it patches (as tolerations do in Kubernetes).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
}


class RenderError(Exception):
    pass


def _load_yaml_stream(path):
    try:
        with open(path) as f:
            return [doc for doc in yaml.safe_load_all(f) if doc]
    except (OSError, yaml.YAMLError) as e:
        raise RenderError(f"{path}: cannot read YAML: {e}") from e


def _kustomization_path(directory):
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    raise RenderError(f"{directory}: no kustomization.yaml")


def _key(resource):
    return (resource.get("kind"), resource.get("metadata", {}).get("name"))


class _Resource:
    """A resource and what kustomize tracks beside it."""

    def __init__(self, body, generated=False, hash_suffix=False):
        self.body = body
        self.generated = generated
        self.hash_suffix = hash_suffix
        # The names it had before prefixes and suffixes, for references and patches.
        self.original_name = body["metadata"]["name"]


def _strategic_merge(target, patch, where):
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    result = dict(target)
    for field, value in patch.items():
        if field.startswith("$"):
            raise RenderError(f"{where}: the directive {field} is not supported by this renderer")
        if value is None:
            result.pop(field, None)
        elif isinstance(value, dict):
            result[field] = _strategic_merge(target.get(field, {}), value, f"{where}.{field}")
        elif isinstance(value, list) and isinstance(target.get(field), list):
            result[field] = _merge_list(field, target[field], value, f"{where}.{field}")
        else:
            result[field] = copy.deepcopy(value)
    return result


def _merge_list(field, target, patch, where):
    key = MERGE_KEYS.get(field)
    if field == "ports":  # container ports merge by containerPort, a Service's by port
        key = "containerPort" if all("containerPort" in p for p in target + patch) else "port"
    if key is None or not all(isinstance(i, dict) and key in i for i in target + patch):
        return copy.deepcopy(patch)
    merged = [copy.deepcopy(item) for item in target]
    for item in patch:
        for i, existing in enumerate(merged):
            if existing[key] == item[key]:
                merged[i] = _strategic_merge(existing, item, f"{where}[{key}={item[key]}]")
                break
        else:
            merged.append(copy.deepcopy(item))
    return merged


def _pod_spec(body):
    if body.get("kind") in POD_TEMPLATE_KINDS:
        return body.get("spec", {}).get("template", {}).get("spec")
    if body.get("kind") == "CronJob":
        return body.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    if body.get("kind") == "Pod":
        return body.get("spec")
    return None


def _containers(body):
    spec = _pod_spec(body) or {}
    return spec.get("initContainers", []) + spec.get("containers", [])


def _config_map_hash(body):
    """kustomize's content hash of a ConfigMap: the first 10 hex digits of the SHA-256 of a
    canonical JSON encoding (Go's, which escapes <, > and &), with 0 1 3 a e mapped to letters.
    kustomize's encoder looks the name up under a path its lookup does not split, so the name it
    hashes is always empty; only the data counts."""
    encoded = {"kind": "ConfigMap", "name": "", "data": body.get("data", {})}
    if body.get("binaryData"):
        encoded["binaryData"] = body["binaryData"]
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


def _build(directory, seen):
    directory = os.path.normpath(directory)
    if directory in seen:
        raise RenderError(f"{directory}: kustomization cycle")
    path = _kustomization_path(directory)
    docs = _load_yaml_stream(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise RenderError(f"{path}: expected one YAML mapping")
    k = docs[0]
    unknown = sorted(set(k) - SUPPORTED_FIELDS)
    if unknown:
        raise RenderError(f"{path}: fields {unknown} are not supported by this renderer "
                          f"(supported: {sorted(SUPPORTED_FIELDS)})")

    resources = []
    for entry in k.get("resources", []):
        target = os.path.join(directory, entry)
        if os.path.isdir(target):
            resources.extend(_build(target, seen | {directory}))
        else:
            for body in _load_yaml_stream(target):
                if not isinstance(body, dict) or "kind" not in body or "metadata" not in body:
                    raise RenderError(f"{target}: a document without kind or metadata")
                resources.append(_Resource(body))

    options = k.get("generatorOptions", {}) or {}
    if set(options) - {"disableNameSuffixHash"}:
        raise RenderError(f"{path}: generatorOptions {sorted(set(options))}: only "
                          "disableNameSuffixHash is supported")
    for generator in k.get("configMapGenerator", []):
        if set(generator) - {"name", "files", "behavior", "options"}:
            raise RenderError(f"{path}: configMapGenerator {generator.get('name')}: only name, "
                              "files, behavior and options are supported")
        data = {}
        for file_entry in generator.get("files", []):
            key, _, file_path = file_entry.rpartition("=") if "=" in file_entry else ("", "", file_entry)
            key = key or os.path.basename(file_path)
            with open(os.path.join(directory, file_path)) as f:
                data[key] = f.read()
        behavior = generator.get("behavior", "create")
        name = generator["name"]
        existing = [r for r in resources if r.body["kind"] == "ConfigMap" and r.original_name == name]
        if behavior == "create":
            if existing:
                raise RenderError(f"{path}: configMapGenerator {name} already exists: use "
                                  "behavior: replace or merge")
            no_hash = (generator.get("options", {}) or {}).get(
                "disableNameSuffixHash", options.get("disableNameSuffixHash", False))
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                    "data": data}
            resources.append(_Resource(body, generated=True, hash_suffix=not no_hash))
        elif behavior in ("replace", "merge"):
            if len(existing) != 1:
                raise RenderError(f"{path}: configMapGenerator {name} ({behavior}) finds no "
                                  "ConfigMap of that name in the resources")
            target = existing[0].body
            target["data"] = data if behavior == "replace" else {**target.get("data", {}), **data}
        else:
            raise RenderError(f"{path}: configMapGenerator {name}: unknown behavior {behavior}")

    for patch_entry in k.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise RenderError(f"{path}: patches: only strategic-merge patch files (path:) are "
                              f"supported, not {sorted(patch_entry)}")
        patch_path = os.path.join(directory, patch_entry["path"])
        for patch in _load_yaml_stream(patch_path):
            kind, name = patch.get("kind"), patch.get("metadata", {}).get("name")
            matches = [r for r in resources
                       if r.body["kind"] == kind and (r.body["metadata"]["name"] == name
                                                      or r.original_name == name)]
            if len(matches) != 1:
                raise RenderError(f"{patch_path}: the patch of {kind} {name} matches "
                                  f"{len(matches)} resources, not one")
            patched = _strategic_merge(matches[0].body, patch, f"{patch_path}: {kind} {name}")
            matches[0].body = patched

    prefix, suffix = k.get("namePrefix", ""), k.get("nameSuffix", "")
    renames = {}
    if prefix or suffix:
        for r in resources:
            old = r.body["metadata"]["name"]
            new = prefix + old + suffix
            r.body["metadata"]["name"] = new
            renames[(r.body["kind"], old)] = new
    for r in resources:
        _fix_references(r.body, renames)

    for label_set in k.get("labels", []):
        if set(label_set) - {"pairs", "includeSelectors", "includeTemplates"}:
            raise RenderError(f"{path}: labels: only pairs, includeSelectors and "
                              "includeTemplates are supported")
        pairs = label_set.get("pairs", {})
        selectors = label_set.get("includeSelectors", False)
        templates = label_set.get("includeTemplates", False) or selectors
        for r in resources:
            body = r.body
            body["metadata"].setdefault("labels", {}).update(pairs)
            if templates and body["kind"] in POD_TEMPLATE_KINDS:
                body["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
            if selectors:
                if body["kind"] == "Service":
                    body["spec"].setdefault("selector", {}).update(pairs)
                elif body["kind"] in POD_TEMPLATE_KINDS | {"PodDisruptionBudget"}:
                    body["spec"].setdefault("selector", {}).setdefault("matchLabels", {}).update(pairs)

    for image in k.get("images", []):
        if set(image) - {"name", "newName", "newTag", "digest"}:
            raise RenderError(f"{path}: images: only name, newName, newTag and digest are supported")
        for r in resources:
            for container in _containers(r.body):
                current = container.get("image", "")
                base = current.split("@")[0]
                if ":" in base.rsplit("/", 1)[-1]:
                    base = base.rsplit(":", 1)[0]
                if base != image["name"]:
                    continue
                new = image.get("newName", base)
                if "digest" in image:
                    new += "@" + image["digest"]
                elif "newTag" in image:
                    new += ":" + str(image["newTag"])
                else:
                    new = current.replace(base, image.get("newName", base), 1)
                container["image"] = new
    return resources


def _fix_references(body, renames):
    def renamed(kind, name):
        return renames.get((kind, name), name)

    spec = _pod_spec(body)
    if spec is not None:
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                volume["configMap"]["name"] = renamed("ConfigMap", volume["configMap"]["name"])
            for source in volume.get("projected", {}).get("sources", []):
                if "configMap" in source:
                    source["configMap"]["name"] = renamed("ConfigMap", source["configMap"]["name"])
        for container in _containers(body):
            for env_from in container.get("envFrom", []):
                if "configMapRef" in env_from:
                    env_from["configMapRef"]["name"] = renamed("ConfigMap", env_from["configMapRef"]["name"])
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    ref["name"] = renamed("ConfigMap", ref["name"])
    if body.get("kind") == "HorizontalPodAutoscaler":
        ref = body["spec"]["scaleTargetRef"]
        ref["name"] = renamed(ref["kind"], ref["name"])


def render(directory):
    """Returns the rendered resources of the kustomization in `directory`, as dicts."""
    resources = _build(directory, frozenset())
    # Content hashes last, on the final content, as kustomize does; then the references follow.
    renames = {}
    for r in resources:
        if r.hash_suffix:
            old = r.body["metadata"]["name"]
            r.body["metadata"]["name"] = f"{old}-{_config_map_hash(r.body)}"
            renames[("ConfigMap", old)] = r.body["metadata"]["name"]
    for r in resources:
        _fix_references(r.body, renames)
    bodies = [r.body for r in resources]
    keys = [_key(b) for b in bodies]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise RenderError(f"{directory}: more than one resource named {duplicates}")
    return bodies


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} KUSTOMIZATION_DIR")
    try:
        print(yaml.safe_dump_all(render(sys.argv[1]), sort_keys=True), end="")
    except RenderError as e:
        sys.exit(f"kustomize_render: {e}")
