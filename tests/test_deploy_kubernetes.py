"""The Kubernetes manifests under deploy/kubernetes: each document valid (strict: no unknown field) for a current
Kubernetes, the node-problem-detector plugin's JSON well formed, and its exit-code mapping run for real against a
collector (check's 0/1/2/3 become NPD's OK/NonOK/Unknown)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.agent.test_check import fleet_with_this_machine
from tests.conftest import KERNEL_CACHES, ROOT
from tests.servers import serve_collector

MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
KUBERNETES = "1.37.0"


def _documents() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, doc) for p in MANIFESTS for doc in yaml.safe_load_all(p.read_text(encoding="utf-8")) if doc]


@pytest.mark.parametrize(("name", "doc"), _documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_valid_for_a_current_kubernetes(name: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_validator_would_catch_a_mistake() -> None:
    cronjob = next(doc for _, doc in _documents() if doc["kind"] == "CronJob")
    broken = copy.deepcopy(cronjob)
    broken["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # not "resources"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_the_agents_token_comes_from_a_secret_and_its_job_yields_to_everything() -> None:
    docs = {doc["kind"]: doc for _, doc in _documents()}
    pod = docs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == docs["PriorityClass"]["metadata"]["name"]
    assert docs["PriorityClass"]["value"] < 0 and docs["PriorityClass"]["preemptionPolicy"] == "Never"
    assert any("secret" in v for v in pod["volumes"]) and "token" not in json.dumps(pod["containers"][0]["env"])
    assert (
        "token_file" in docs["ConfigMap"]["data"]["agent.toml"] if "agent.toml" in docs["ConfigMap"]["data"] else True
    )


def test_each_hour_checks_a_pool_one_pod_per_node_and_spreads_the_posts() -> None:
    import tomllib

    from agent.cli.settings import KEYS

    docs = {doc["kind"]: doc for _, doc in _documents()}
    job = docs["CronJob"]["spec"]["jobTemplate"]["spec"]
    pod = job["template"]
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()  # selects its own pods
    assert job["parallelism"] == job["completions"] > 1
    (config,) = [d for _, d in _documents() if d["kind"] == "ConfigMap" and "agent.toml" in d.get("data", {})]
    settings = tomllib.loads(config["data"]["agent.toml"])
    assert set(settings) <= set(KEYS) and 0 < settings["jitter"] < job["activeDeadlineSeconds"]


def test_the_kernels_compiled_on_a_node_outlive_each_hours_container() -> None:
    docs = {doc["kind"]: doc for _, doc in _documents()}
    pod = docs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    on_node = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    mounts = [m["mountPath"] for m in container["volumeMounts"] if m["name"] in on_node]
    for name in KERNEL_CACHES:
        assert any(env[name].startswith(mount + "/") for mount in mounts), (name, env.get(name), mounts)


def _npd_rule() -> list[str]:
    plugin = next(doc for _, doc in _documents() if "flopfleet-monitor.json" in doc.get("data", {}))
    (rule,) = json.loads(plugin["data"]["flopfleet-monitor.json"])["rules"]
    return [rule["path"], *rule["args"]]


@pytest.mark.parametrize(
    ("this_machine", "fields", "npd"),
    [
        ([681.0, 679.5], {}, 0),
        ([681.0, 560.0], {}, 0),
        ([681.0, 680.0], {"counters_after": {"remapped_rows_failed": True}}, 1),
    ],
)
def test_the_npd_plugin_maps_checks_exit_codes(
    tmp_path: Path, this_machine: list[float], fields: dict[str, Any], npd: int
) -> None:
    db = tmp_path / "fleet.duckdb"
    fleet_with_this_machine(db, this_machine, **fields)
    bin_dir = Path(sys.executable).parent  # where flopfleet-agent is installed
    with serve_collector(db) as site:
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FLOPFLEET_COLLECTOR": site.url,
               "FLOPFLEET_TOKEN": site.token, "FLOPFLEET_DEVICE": "cpu"}  # fmt: skip
        done = subprocess.run(_npd_rule(), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == npd, done.stdout + done.stderr


def test_the_npd_plugin_says_unknown_when_the_collector_is_away() -> None:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "FLOPFLEET_COLLECTOR": "http://127.0.0.1:9", "FLOPFLEET_DEVICE": "cpu"}  # fmt: skip
    done = subprocess.run(_npd_rule(), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stdout + done.stderr
