#!/usr/bin/env bash
# Checks the deployment examples offline, and exits non-zero on any error:
# - Deploy/compose/compose.yaml against the Compose Specification's JSON schema (check-jsonschema's
#   vendored copy);
# - Deploy/kubernetes/*.yaml against Kubernetes 1.30's schemas, strict (kubernetes-validate),
#   and kustomization.yaml lists every manifest;
# - every image is localhost/push-relay:<base version> (PushRelayVersion.current: the name release.sh
#   gives the OCI archive's image, whatever the build) or docker.io/library/postgres:15;
# - each push-relay configuration with `push-relay config check` (strict keys and types), in the
#   environment the example gives it, with throwaway keys in place of the credential files, which
#   must be mounted read-only where the configuration names them.
# Usage: Deploy/examples-check.sh [--skip-config-check]
set -euo pipefail
cd "$(dirname "$0")/.."
. Deploy/lib.sh

K8S_VERSION=1.30
VENV=.build/examples-venv

if ! "$VENV/bin/python" -c 'import kubernetes_validate, check_jsonschema, yaml' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate==1.37.0 check-jsonschema==0.39.0
fi
if ! command -v openssl >/dev/null; then
    sudo=$([[ $EUID -eq 0 ]] || echo sudo)
    $sudo apt-get update -qq && $sudo apt-get install -y -qq openssl
fi

version=$(base_version)
[[ -n $version ]] || { echo "no version in Sources/PushRelay/App/PushRelayVersion.swift" >&2; exit 1; }

# The newest build unless EXAMPLES_CHECK_BINARY names one (not PUSH_RELAY_*: push-relay refuses
# PUSH_RELAY_ variables it does not know).
binary=${EXAMPLES_CHECK_BINARY:-$(ls -t .build/debug/push-relay .build/release/push-relay 2>/dev/null | head -n 1 || true)}
if [[ ${1:-} == --skip-config-check ]]; then
    binary=""
elif [[ -z $binary ]]; then
    echo "no push-relay binary: build it, set EXAMPLES_CHECK_BINARY or pass --skip-config-check" >&2; exit 1
elif ! "$binary" --help 2>/dev/null | grep '^  config ' >/dev/null; then
    echo "$binary has no working \`config check\`: rebuild it or set EXAMPLES_CHECK_BINARY" >&2; exit 1
fi

manifests=()
for file in Deploy/kubernetes/*.yaml; do
    [[ $file == */kustomization.yaml ]] || manifests+=("$file")
done

status=0
echo -n "compose.yaml against the Compose Specification schema: "
"$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec Deploy/compose/compose.yaml || status=1
if "$VENV/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "${manifests[@]}"; then
    echo "ok -- ${#manifests[@]} manifests valid for Kubernetes $K8S_VERSION (strict)"
else
    status=1
fi

"$VENV/bin/python" - "$version" "$binary" "${manifests[@]}" <<'PY' || status=1
import base64, json, os, re, secrets, subprocess, sys, tempfile
import yaml

version, binary, manifests = sys.argv[1], sys.argv[2], sys.argv[3:]
relay_image = f"localhost/push-relay:{version}"
allowed_images = {relay_image, "docker.io/library/postgres:15"}
failures = set()


def fail(message):
    if message not in failures:
        failures.add(message)
        print(f"FAIL {message}")


def walk(node, path=""):
    """(dotted path, key, value) of every mapping entry under node."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, value in items:
        child = f"{path}[{key}]" if isinstance(node, list) else f"{path}.{key}" if path else str(key)
        yield child, key, value
        yield from walk(value, child)


def check_images(label, document):
    for path, key, value in walk(document):
        if key == "image" and value not in allowed_images:
            fail(f"{label}: {path} is {value!r}; expected {relay_image} or docker.io/library/postgres:15")


def credential_files(config):
    return [(path, value) for path, key, value in walk(config) if isinstance(key, str) and (key == "file" or key.endswith("_file"))]


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def stand_in(key, destination):
    """Writes a throwaway credential of the kind `key` names."""
    if key.endswith("apns.token.key_file"):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", destination)
    elif key.endswith("fcm.service_account_file"):
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", destination)
        with open(destination) as pem:
            account = {"type": "service_account", "project_id": "examples-check", "private_key": pem.read(),
                       "client_email": "check@examples-check.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"}
        with open(destination, "w") as out:
            json.dump(account, out)
    elif key.endswith("key_file") and key.startswith("apps_store."):
        with open(destination, "w") as out:
            out.write(base64.b64encode(os.urandom(32)).decode())
    elif re.search(r"(secret_file|api_token_file|password_file)$", key):
        with open(destination, "w") as out:
            out.write(secrets.token_hex(24))
    else:
        raise ValueError(f"no stand-in for {key}")


def config_check(label, text, environment):
    if not binary:
        print(f"SKIP {label}: push-relay config check (--skip-config-check)")
        return
    with tempfile.TemporaryDirectory() as directory:
        files = sorted(credential_files(yaml.safe_load(text) or {}), key=lambda entry: -len(entry[1]))
        for index, (key, path) in enumerate(files):
            destination = os.path.join(directory, f"{index}-{os.path.basename(path)}")
            try:
                stand_in(key, destination)
            except ValueError as error:
                return fail(f"{label}: {error}")
            text = text.replace(path, destination)
        config = os.path.join(directory, "push-relay.yaml")
        with open(config, "w") as out:
            out.write(text)
        result = subprocess.run([binary, "config", "check", "--config", config], capture_output=True, text=True,
                                env={"PATH": os.environ["PATH"], **environment})
    if result.returncode:
        return fail(f"{label}: push-relay config check: {(result.stderr or result.stdout).strip().replace(config, 'the file')}")
    # config check accepts any log.level and log.format, which serve refuses: check them here.
    settings = dict(re.findall(r"^(log\.\w+) +(\S+)", result.stdout, re.M))
    if settings.get("log.format") not in ("text", "json"):
        return fail(f"{label}: log.format is {settings.get('log.format')!r}; serve takes text or json")
    if settings.get("log.level") not in ("trace", "debug", "info", "notice", "warning", "error", "critical"):
        return fail(f"{label}: log.level is {settings.get('log.level')!r}")
    print(f"ok -- {label}: push-relay config check: {result.stdout.strip().splitlines()[-1]}")


def config_path(arguments):
    arguments = [str(argument) for argument in arguments or []]
    return arguments[arguments.index("--config") + 1] if "--config" in arguments[:-1] else None


# Compose: the relay's config and credential files come from read-only bind mounts.
with open("Deploy/compose/compose.yaml") as file:
    compose = yaml.safe_load(file)
check_images("compose.yaml", compose)
for name, service in compose.get("services", {}).items():
    if service.get("image") != relay_image:
        continue
    label = f"compose.yaml services.{name}"
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *options = volume.split(":")
        mounts[target] = (source, "ro" in ",".join(options).split(","))

    def mounted(path):
        for target, (source, read_only) in mounts.items():
            if path == target or path.startswith(target.rstrip("/") + "/"):
                if not read_only:
                    fail(f"{label}: {target} is not mounted read-only")
                inside = os.path.relpath(path, target) if path != target else ""
                return os.path.normpath(os.path.join("Deploy/compose", source, inside))
        fail(f"{label}: nothing is mounted at {path}")

    config = config_path(service.get("command"))
    source = config and mounted(config)
    if not source or not os.path.isfile(source):
        fail(f"{label}: no configuration file mounted at --config {config}")
        continue
    with open(source) as file:
        text = file.read()
    for _, path in credential_files(yaml.safe_load(text) or {}):
        mounted(path)
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(entry.split("=", 1) for entry in environment)
    environment = {key: re.sub(r"\$\{[^}]*\}", "placeholder", str(value)) for key, value in environment.items()}
    config_check(f"{label} ({source})", text, environment)

# Kubernetes: the config from its ConfigMap, credential files and DATABASE_URL from the Secret.
documents = []
for manifest in manifests:
    with open(manifest) as file:
        documents += [(manifest, document) for document in yaml.safe_load_all(file) if document]
objects = {(document["kind"], document["metadata"]["name"]): document for _, document in documents}
for manifest, document in documents:
    check_images(os.path.basename(manifest), document)
with open("Deploy/kubernetes/kustomization.yaml") as file:
    listed = set(yaml.safe_load(file).get("resources", []))
present = {os.path.basename(manifest) for manifest in manifests}
if listed != present:
    fail(f"kustomization.yaml resources {sorted(listed)} differ from the manifests {sorted(present)}")


def volume_file(pod, container, path):
    """The text of `path` as the pod's volumes provide it, or None."""
    directory, name = os.path.split(path)
    mount = next((m for m in container.get("volumeMounts", []) if m["mountPath"].rstrip("/") == directory), None)
    if mount is None:
        return None
    if not mount.get("readOnly"):
        fail(f"{pod['label']}: {directory} is not mounted readOnly")
    volume = next((v for v in pod["spec"].get("volumes", []) if v["name"] == mount["name"]), {})
    kind, source = ("ConfigMap", volume["configMap"]) if "configMap" in volume else ("Secret", volume.get("secret", {}))
    items = {item["path"]: item["key"] for item in source.get("items", [])}
    key = items.get(name, None if items else name)
    target = objects.get((kind, source.get("name", source.get("secretName"))), {})
    if key in target.get("stringData", {}):
        return target["stringData"][key]
    if key in target.get("data", {}):
        return target["data"][key] if kind == "ConfigMap" else base64.b64decode(target["data"][key]).decode()
    return None


def secret_value(label, reference):
    secret = objects.get(("Secret", reference["name"]), {})
    if reference["key"] in secret.get("stringData", {}):
        return secret["stringData"][reference["key"]]
    if reference["key"] in secret.get("data", {}):
        return base64.b64decode(secret["data"][reference["key"]]).decode()
    fail(f"{label}: no Secret {reference['name']} with {reference['key']}")
    return ""


for (kind, name), document in objects.items():
    if kind not in ("Deployment", "Job"):
        continue
    spec = document["spec"]["template"]["spec"]
    for container in spec["containers"]:
        if container["image"] != relay_image:
            continue
        pod = {"label": f"{kind}/{name}", "spec": spec}
        if spec.get("enableServiceLinks") is not False:
            fail(f"{kind}/{name}: enableServiceLinks must be false (a Service named http would set HTTP_PORT=tcp://…)")
        arguments = container.get("args") or container.get("command") or []
        config = config_path(arguments)
        text = config and volume_file(pod, container, config)
        if not text:
            fail(f"{kind}/{name}: no configuration at --config {config}")
            continue
        if arguments[0] == "serve":
            for _, path in credential_files(yaml.safe_load(text) or {}):
                if volume_file(pod, container, path) is None:
                    fail(f"{kind}/{name}: no volume provides {path}")
        environment = {}
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            environment[variable["name"]] = secret_value(pod["label"], reference) if reference else str(variable.get("value", ""))
        config_check(f"{kind}/{name}", text, environment)

sys.exit(1 if failures else 0)
PY

if [[ $status -eq 0 ]]; then echo "examples-check: all passed"; else echo "examples-check: FAILED" >&2; fi
exit $status
