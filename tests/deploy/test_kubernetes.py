"""deploy/kubernetes: the manifests pass `kubernetes-validate --strict` against the Kubernetes schemas it bundles
(no API server can run here), the DaemonSet runs `check --local` with the host at /host, and what it leaves on the
node meets node-problem-detector's custom plugin contract (exit 0 OK, 1 NonOK, anything else Unknown; stdout,
trimmed, cut at max_output_length bytes, is the condition's message), run for real on an emulated node."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from .conftest import BASELINE, NODE, LabNode

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
MANIFESTS = (K8S / "daemonset.yaml", K8S / "node-readiness.yaml")
NPD_CONFIG = K8S / "npd" / "fabricproof-plugin.json"
PLUGIN = K8S / "npd" / "fabricproof-npd-plugin"
NODE_CHECK = K8S / "fabricproof-node-check"
CONTAINERFILE = REPO / "deploy" / "container" / "Containerfile"
TAINT = "fabricproof.io/validation-pending:NoSchedule"
VALIDATE = shutil.which("kubernetes-validate")
needs_validator = pytest.mark.skipif(VALIDATE is None, reason="kubernetes-validate is missing: pip install -e '.[test]'")

# kubectl against a node's taints kept in a file: the one call it makes to read them and the one to remove one,
# each logged. A stand-in for the API server, which cannot run here; the argv are what an operator would type.
KUBECTL = """\
#!/bin/sh
echo "$*" >> {log}
case "$1 $2 $3 $4" in
    "get node {node} -o") tr '\\n' ' ' < {taints} | sed 's/ $//' ;;
    "taint node {node} "*) key=${{4%%:*}}; grep -vxF "$key" {taints} > {taints}.new; mv {taints}.new {taints} ;;
    *) echo "kubectl stand-in: unexpected $*" >&2; exit 2 ;;
esac
"""


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _validate(*paths: Path) -> subprocess.CompletedProcess:
    assert VALIDATE is not None
    return subprocess.run([VALIDATE, "--strict", *map(str, paths)], capture_output=True, text=True, timeout=300,
                          check=False)


@needs_validator
def test_the_manifests_pass_kubernetes_validate_strict():
    res = _validate(*MANIFESTS)
    assert res.returncode == 0, res.stdout + res.stderr
    passed = [line for line in res.stdout.splitlines() if " passed for resource " in line]
    assert len(passed) == 5, res.stdout  # namespace, serviceaccount, daemonset; clusterrole, clusterrolebinding


@needs_validator
def test_kubernetes_validate_strict_refuses_what_a_cluster_would(tmp_path):
    """The validator under the test is strict: a misspelt field of the DaemonSet's container is refused."""
    broken = tmp_path / "daemonset.yaml"
    broken.write_text(MANIFESTS[0].read_text().replace("volumeMounts:", "volumeMount:"))
    res = _validate(broken)
    assert res.returncode != 0 and "volumeMount" in res.stdout + res.stderr


def test_the_daemonset_runs_the_node_check_with_the_host_at_slash_host():
    (daemonset,) = [d for d in _documents(MANIFESTS[0]) if d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["FABRICPROOF_HOST_ROOT"] == "/host" and env["FABRICPROOF_PENDING_TAINT"] == TAINT
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert volumes[mounts["/host"]["name"]]["hostPath"]["path"] == "/" and mounts["/host"]["readOnly"]
    assert volumes[mounts[env["FABRICPROOF_STATE_DIR"]]["name"]]["hostPath"]["path"] == "/var/lib/fabricproof"
    assert {"operator": "Exists"} in pod["tolerations"]  # it must run on the nodes the taint keeps work off
    # The command is the script the image installs, and the image's entry point is the CLI.
    assert container["command"] == [NODE_CHECK.name]
    image = DockerfileParser(fileobj=CONTAINERFILE.open("rb"))
    runs = " ".join(i["value"] for i in image.structure if i["instruction"] == "RUN")
    assert f"deploy/kubernetes/{NODE_CHECK.name} /usr/local/bin/{NODE_CHECK.name}" in runs
    # Its service account may read and patch nodes (to take the taint off), and nothing else.
    roles = {d["kind"]: d for d in _documents(MANIFESTS[1])}
    assert roles["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert roles["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": daemonset["metadata"]["namespace"]}]


def test_the_npd_config_is_one_node_problem_detector_accepts():
    """What NPD's CustomPluginConfig.Validate and ApplyConfiguration check (pkg/custompluginmonitor/types), and
    only the fields its JSON types have."""
    config = json.loads(NPD_CONFIG.read_text())
    assert set(config) <= {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
    assert config["plugin"] == "custom" and config["source"]
    assert set(config["pluginConfig"]) <= {"invoke_interval", "timeout", "max_output_length", "concurrency",
                                           "enable_message_change_based_condition_update", "skip_initial_status"}
    conditions = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert set(rule) <= {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
        assert rule["type"] in ("temporary", "permanent")
        assert rule["type"] != "permanent" or rule["condition"] in conditions
        assert _seconds(rule["timeout"]) <= _seconds(config["pluginConfig"]["timeout"])
        assert Path(rule["path"]).name == PLUGIN.name and os.access(PLUGIN, os.X_OK)
        # The plugin cuts its line where NPD would, so the message ends where it should rather than mid-word.
        assert rule["args"][2] == str(config["pluginConfig"]["max_output_length"])


def _seconds(duration: str) -> float:
    assert duration[-1] == "s" and duration[:-1].isdigit(), duration
    return float(duration[:-1])


def npd(status: Path) -> tuple[str, str, str]:
    """Run the plugin as NPD's rule does (its args, the status file where the test keeps it), and read the result
    as NPD does: (OK | NonOK | Unknown, the message NPD keeps, the raw stdout)."""
    config = json.loads(NPD_CONFIG.read_text())
    (rule,) = config["rules"]
    res = subprocess.run([str(PLUGIN), str(status), *rule["args"][1:]], capture_output=True, text=True, timeout=60,
                         check=False, env={"PATH": "/usr/bin:/bin"})
    assert res.stderr == ""
    message = res.stdout.strip()[:config["pluginConfig"]["max_output_length"]]
    return {0: "OK", 1: "NonOK"}.get(res.returncode, "Unknown"), message, res.stdout


def _one_line(stdout: str) -> str:
    """The plugin's contract as this repo holds it: exactly one line, within max_output_length bytes."""
    limit = json.loads(NPD_CONFIG.read_text())["pluginConfig"]["max_output_length"]
    assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout
    assert len(stdout.rstrip("\n").encode()) <= limit
    return stdout.rstrip("\n")


def node_check(node: LabNode, state: Path, *extra: str) -> subprocess.CompletedProcess:
    """The DaemonSet's container as the manifest has it (its args and its taint), run once on the lab node: the
    ConfigMap's directory and the state hostPath are the test's, and FABRICPROOF_INTERVAL is left out (the pod
    loops; the test runs one check)."""
    (daemonset,) = [d for d in _documents(MANIFESTS[0]) if d["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    config = state.parent / "etc-fabricproof"
    config.mkdir(exist_ok=True)
    shutil.copy(BASELINE, config / "baseline.yaml")
    shutil.copy(node.inventory, config / "inventory.yml")
    args = [a.replace("/etc/fabricproof/", f"{config}/") for a in container["args"]]
    assert args != container["args"]
    return subprocess.run([str(NODE_CHECK), *args, *extra], capture_output=True, text=True, timeout=300, check=False,
                          env=node.env(NODE_NAME=NODE, FABRICPROOF_STATE_DIR=str(state),
                                       FABRICPROOF_PENDING_TAINT=env["FABRICPROOF_PENDING_TAINT"]))


@pytest.fixture
def k8s_node(lab_node: LabNode, tmp_path: Path) -> tuple[LabNode, Path, Path, Path]:
    """The lab node as a Kubernetes node: its state hostPath, its taints (validation pending) and kubectl."""
    state, taints, log = tmp_path / "var-lib-fabricproof", tmp_path / "taints", tmp_path / "kubectl.log"
    state.mkdir()
    taints.write_text("fabricproof.io/validation-pending\nnvidia.com/gpu\n")
    kubectl = lab_node.bin / "kubectl"
    kubectl.write_text(KUBECTL.format(log=log, node=NODE, taints=taints))
    kubectl.chmod(0o755)
    return lab_node, state, taints, log


def test_a_failing_node_keeps_its_taint_and_npd_reads_nonok_with_the_worst_failure(k8s_node):
    node, state, taints, log = k8s_node
    node.fault("nvlink-inactive")
    res = node_check(node, state)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith(f"FAIL {NODE}: nvlink.links_active (critical): GPU 1: 16 of 18 links active [action: reset_gpu]\n")
    assert "fabricproof.io/validation-pending" in taints.read_text() and not log.exists()
    status, message, stdout = npd(state / "status")
    assert status == "NonOK"
    assert _one_line(stdout) == message
    assert message == f"2 problems: FAIL {NODE}: nvlink.links_active (critical): GPU 1: 16 of 18 links active [action: reset_gpu]"
    prom = state / "fabricproof.prom"
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644  # node_exporter runs as its own user
    assert 'fabricproof_check_result{check="nvlink.links_active",host="h100-0001"' in prom.read_text()


def test_a_passing_node_loses_its_taint_once_and_npd_reads_ok(k8s_node):
    node, state, taints, log = k8s_node
    res = node_check(node, state)
    assert res.returncode == 0, res.stdout + res.stderr
    assert taints.read_text() == "nvidia.com/gpu\n"  # only the validation-pending taint came off
    assert log.read_text().splitlines() == [f"get node {NODE} -o jsonpath={{.spec.taints[*].key}}",
                                            f"taint node {NODE} {TAINT}-"]
    status, message, stdout = npd(state / "status")
    assert status == "OK" and _one_line(stdout) == message
    assert message.startswith(f"OK {NODE}: ") and "checks passed" in message
    # The next passing check finds the taint gone and leaves the node alone.
    assert node_check(node, state).returncode == 0
    assert log.read_text().splitlines()[2:] == [f"get node {NODE} -o jsonpath={{.spec.taints[*].key}}"]


def test_an_incomplete_check_or_bad_input_is_unknown_to_npd(k8s_node):
    node, state, taints, log = k8s_node
    node.fault("tool-garbage")  # ibstat prints binary garbage: its checks cannot be judged
    res = node_check(node, state)
    assert res.returncode == 3, res.stdout + res.stderr
    status, message, stdout = npd(state / "status")
    assert status == "Unknown" and _one_line(stdout) == message and message.startswith("fabricproof exit 3: ")
    assert "fabricproof.io/validation-pending" in taints.read_text()

    res = node_check(node, state, "--fail-on", "bogus")
    assert res.returncode == 2
    status, message, stdout = npd(state / "status")
    assert status == "Unknown" and _one_line(stdout) == message
    assert message.startswith("fabricproof exit 2: error: ") and "bogus" in message


def test_npd_reads_no_result_an_unreadable_one_or_a_stale_one_as_unknown(tmp_path):
    status = tmp_path / "status"
    assert npd(status)[:2] == ("Unknown", f"no fabricproof check result in {status} yet")
    status.write_text("garbage\n")
    assert npd(status)[:2] == ("Unknown", f"unreadable fabricproof check result in {status}")
    status.write_text(f"0 {int(time.time()) - 3600} 1\nOK {NODE}: 62 checks passed, 36 not applicable\n")
    state, message, _ = npd(status)
    assert state == "Unknown" and message.startswith("last fabricproof check was 36") and "older than 900s" in message
    long = "FAIL n: x (critical): " + "GPU 1: 16 of 18 links active; " * 20
    status.write_text(f"1 {int(time.time())} 1\n{long}\n")
    state, message, stdout = npd(status)
    assert state == "NonOK" and _one_line(stdout) == message == long[:200]
