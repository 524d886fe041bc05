"""The Slurm recipe under deploy/slurm against a real single-node cluster: munged, slurmctld and slurmd started here
on this machine (Debian's slurm-wlm and munge, as root), a real collector on 127.0.0.1 and the real agent: a batch
job whose run reaches the collector, the scrontab entry's options accepted by the controller, and the health check
as slurmd runs it (HealthCheckProgram and Prolog from slurm.conf) draining the node on CRITICAL with its reason,
never on OK or UNKNOWN, and never over someone else's drain."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.store import Store
from schemas import RunSubmission
from tests.conftest import ROOT
from tests.factories import T0, gpu, make_run, matmul
from tests.servers import Collector, serve_collector

SLURM = ROOT / "deploy" / "slurm"
BATCH = SLURM / "flopfleet-run.sbatch"
SCRONTAB = SLURM / "flopfleet.scrontab"
CHECK = SLURM / "flopfleet-slurm-check.py"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "squeue", "scancel")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
#: CI installs Debian's slurm-wlm and munge and sets FLOPFLEET_SLURM_TESTS=required, so a missing tool fails there.
REQUIRED = os.environ.get("FLOPFLEET_SLURM_TESTS") == "required"
WHY_NOT = (f"{', '.join(MISSING)} missing (apt-get install slurm-wlm munge)" if MISSING
           else "slurmd needs root" if os.geteuid() != 0 else "")  # fmt: skip
pytestmark = pytest.mark.skipif(bool(WHY_NOT) and not REQUIRED, reason=WHY_NOT or "-")
BIN = Path(sys.executable).parent  # where this checkout's flopfleet-agent is installed
HERE = socket.gethostname()
H200 = "NVIDIA H200"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: How long a wait on the cluster may take before the test calls it hung: a hang guard, not a speed target (on a
#: loaded 2-core machine a requeue took over 30 s).
WAIT_S = 300.0


def _until(probe: Callable[[], Any], what: str, timeout: float = WAIT_S, show: Callable[[], str] = str) -> Any:
    """``probe()`` once it is true; AssertionError after ``timeout`` s, with ``show()`` (say, the daemons' logs)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{show()}")
        time.sleep(0.2)


@dataclass
class Cluster:
    """A one-node Slurm cluster in ``dir``: partition ``gpu`` holds node ``node``; ``env`` reaches it."""

    dir: Path
    node: str
    env: dict[str, str]
    logs: list[Path] = field(default_factory=list)

    def run(self, *command: str, env: dict[str, str] | None = None, timeout: float = 30,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, env={**self.env, **(env or {})},
                              timeout=timeout, cwd=cwd or self.dir)  # fmt: skip

    def state(self) -> tuple[str, str]:
        """The node's state as sinfo words it, and its reason ('none' when it has none)."""
        done = self.run("sinfo", "--noheader", "--Node", "--nodes", self.node, "--format", "%T|%E")
        state, _, reason = done.stdout.strip().partition("|")
        return state, reason

    def drain(self, reason: str) -> None:
        done = self.run("scontrol", "update", f"nodename={self.node}", "state=drain", f"reason={reason}")
        assert done.returncode == 0, done.stderr

    def reset(self) -> None:
        """No jobs, the node undrained and idle, the hooks inert: the state every test starts from."""
        for hook in self.dir.glob("hooks/*.env"):
            hook.unlink()
        self.run("scancel", "--full", "--partition", "gpu")
        _until(lambda: not self.run("squeue", "--noheader").stdout.strip(), "the queue to empty")
        if "drain" in self.state()[0]:
            self.run("scontrol", "update", f"nodename={self.node}", "state=undrain")
        _until(lambda: self.state()[0] == "idle", f"node {self.node} to be idle")

    def hook(self, name: str, agent_config: Path) -> tuple[Path, Path]:
        """Arm ``hooks/<name>``, the wrapper slurm.conf names (or a test runs as slurmd would): what a site's wrapper
        gives the check beyond slurmd's bare environment (SLURMD_NODENAME alone), namely where slurm.conf and
        agent.toml are. Returns the wrapper and the check's log."""
        wrapper, env, log = self.wrapper(name)
        env.write_text(f"FLOPFLEET_CONFIG='{agent_config}'\n", encoding="utf-8")
        log.unlink(missing_ok=True)
        return wrapper, log

    def wrapper(self, name: str) -> tuple[Path, Path, Path]:
        """``hooks/<name>``: inert until ``hooks/<name>.env`` exists, then it runs the check with those settings."""
        hooks = self.dir / "hooks"
        wrapper, env, log = hooks / name, hooks / f"{name}.env", hooks / f"{name}.log"
        if not wrapper.exists():
            conf = self.env["SLURM_CONF"]
            wrapper.write_text(HOOK.format(env=env, conf=conf, bin=BIN, check=CHECK, log=log), encoding="utf-8")
            wrapper.chmod(0o755)
        return wrapper, env, log

    def tail(self) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                         for p in self.logs if p.exists())  # fmt: skip


HOOK = """#!/bin/sh
[ -r {env} ] || exit 0
. {env}
export SLURM_CONF={conf} FLOPFLEET_CONFIG PATH={bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
exec {check} --log {log}
"""


def _node_line() -> str:
    """This machine as ``slurmd -C`` sees it (so the node is never drained for a mismatch), with little memory."""
    done = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30)
    line = done.stdout.splitlines()[0]
    return re.sub(r"RealMemory=\d+", "RealMemory=100", line)


def _slurm_conf(base: Path, node_line: str, ports: tuple[int, int]) -> str:
    node = node_line.split()[0].split("=", 1)[1]
    return f"""ClusterName=flopfleet-test
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
AuthType=auth/munge
AuthInfo=socket={base}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/slurmctld.log
SlurmdLogFile={base}/slurmd.log
PlugStackConfig={base}/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
KillWait=2
# sbatch --wait polls every 2 s only while that is under MinJobAge/2 (else 8, then 32 s)
MinJobAge=4
HealthCheckProgram={base}/hooks/healthcheck
HealthCheckInterval=2
Prolog={base}/hooks/prolog
{node_line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=gpu Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm() -> Iterator[Cluster]:
    """munged (its own key and socket), slurmctld and slurmd in the foreground, in a temporary directory (0755: munged
    wants its socket reachable by all); stopped, every job cancelled first, however the tests end."""
    assert not WHY_NOT, f"the Slurm tests are required here (FLOPFLEET_SLURM_TESTS=required): {WHY_NOT}"
    base = Path(tempfile.mkdtemp(prefix="flopfleet-slurm-", dir="/tmp"))  # short: a socket path has 107 bytes
    base.chmod(0o755)
    daemons: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env.update(SLURM_CONF=str(base / "slurm.conf"), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    cluster = Cluster(base, "", env, [base / "munged.log", base / "slurmctld.log", base / "slurmd.log"])

    def start(*command: str, log: str) -> None:
        with open(base / log, "wb") as out:
            daemons.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=base))

    try:
        for sub in ("munge", "state", "spool", "hooks"):
            (base / sub).mkdir(mode=0o755)
        key = base / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        start("munged", "--foreground", f"--key-file={key}", f"--socket={base}/munge/munge.socket",
              f"--pid-file={base}/munge/munged.pid", f"--seed-file={base}/munge/munged.seed",
              f"--log-file={base}/munged.log", log="munged.out")  # fmt: skip
        _until(lambda: (base / "munge" / "munge.socket").exists(), "munged's socket")
        node_line = _node_line()
        cluster.node = node_line.split()[0].split("=", 1)[1]
        (base / "slurm.conf").write_text(_slurm_conf(base, node_line, (_free_port(), _free_port())))
        (base / "cgroup.conf").write_text("ConstrainCores=no\nConstrainDevices=no\nConstrainRAMSpace=no\n")
        (base / "plugstack.conf").write_text("")
        for name in ("healthcheck", "prolog"):  # named in slurm.conf
            cluster.wrapper(name)
        start("slurmctld", "-D", "-i", log="slurmctld.out")
        start("slurmd", "-D", "-N", cluster.node, log="slurmd.out")
        _until(lambda: cluster.state()[0] == "idle", f"node {cluster.node} to be idle", show=cluster.tail)
        yield cluster
    finally:
        if daemons:
            with contextlib.suppress(Exception):
                cluster.reset()
        for daemon in reversed(daemons):  # slurmd, slurmctld, munged
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(timeout=5)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def cluster(slurm: Cluster) -> Iterator[Cluster]:
    slurm.reset()
    yield slurm
    slurm.reset()


def _agent_config(tmp_path: Path, site: Collector | None) -> Path:
    """/etc/flopfleet/agent.toml as a site writes it, the token in a file of its own; ``None``: a collector that is
    not there."""
    token = tmp_path / "token"
    token.write_text((site.token if site else "ffk_none") + "\n")
    token.chmod(0o600)
    url = site.url if site else f"http://127.0.0.1:{_free_port()}"
    config = tmp_path / "agent.toml"
    config.write_text(f'collector = "{url}"\ntoken_file = "{token}"\ndevice = "cpu"\n'
                      f'spool_dir = "{tmp_path / "spool"}"\n')  # fmt: skip
    return config


def _this_host(bf16: tuple[float, float], hour: int = 0, **gpu1: Any) -> RunSubmission:
    """A run of this machine with two H200s, GPU 1 with ``gpu1``'s fields (its counters, say)."""
    cards = [gpu(H200, index=i, memory_gib=141, host=HERE, **(gpu1 if i == 1 else {})) for i in range(2)]
    results = [matmul(8192, "bf16", value, gpu_index=i) for i, value in enumerate(bf16)]
    return make_run(results, gpus=cards, hostname=HERE, started=T0 + timedelta(hours=hour))


@contextlib.contextmanager
def _fleet(tmp_path: Path, *this_host: RunSubmission) -> Iterator[Collector]:
    """A collector that knows three healthy H200 peers and ``this_host``'s runs."""
    db = tmp_path / "fleet.duckdb"
    peers = [make_run([matmul(8192, "bf16", 680.0 + n)], gpus=[gpu(H200, index=0, memory_gib=141, host=f"peer{n}")],
                      hostname=f"peer{n}") for n in range(3)]  # fmt: skip
    with Store(db) as store:  # one commit, then the figures and summaries, before any collector serves the file
        store.add_group([run.model_dump_json().encode() for run in (*peers, *this_host)])
        store.refresh()
    with serve_collector(db, validate_workers=0) as site:
        yield site


def test_a_batch_job_runs_the_agent_on_each_node_and_its_run_reaches_the_collector(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "job.out"
    with serve_collector(tmp_path / "c.duckdb", validate_workers=0) as site:
        env = {"FLOPFLEET_CONFIG": str(_agent_config(tmp_path, site)), "FLOPFLEET_SUITE": "tiny",
               "FLOPFLEET_PLUGINS": "tests.agent.tiny_suite", "PYTHONPATH": str(ROOT), "COLUMNS": "300",
               "FLOPFLEET_ISOLATION": "inline"}  # fmt: skip
        done = cluster.run("sbatch", "--wait", "--parsable", "--partition=gpu", "--nodes=1-8", f"--output={out}",
                           str(BATCH), env=env, timeout=180, cwd=tmp_path)  # fmt: skip
        log = out.read_text(errors="replace") if out.exists() else "(no output)"
        assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{log}\n{cluster.tail()}"
        job = done.stdout.strip().split(";")[0]
        answer = httpx.post(f"{site.url}/api/v1/sql", headers=site.auth, timeout=30,
                            json={"sql": "SELECT hostname, suite, tags->>'slurm_job', tags->>'slurm_partition' "
                                         "FROM runs"})  # fmt: skip
    assert answer.json()["rows"] == [[HERE, "tiny", job, "gpu"]], log
    assert f"job {job} on 1 node(s): {cluster.node}" in log and f"file {tmp_path / 'agent.toml'}" in log, log


def test_the_scrontab_entry_is_valid_spreads_clusters_and_matches_the_batch_script(cluster: Cluster) -> None:
    lines = SCRONTAB.read_text().splitlines()
    options = [line.split(None, 1)[1] for line in lines if line.startswith("#SCRON")]
    (entry,) = [line for line in lines if line.strip() and not line.startswith("#")]
    fields = r"(\*|\d+(-\d+)?(,\d+(-\d+)?)*)(/\d+)?"
    assert re.fullmatch(rf"{fields}( {fields}){{4}} /\S+\.sbatch", entry), entry
    sbatch_options = {line.split(None, 1)[1] for line in BATCH.read_text().splitlines() if line.startswith("#SBATCH")}
    site_specific = {"--partition=gpu", "--nodes=1-64", "--chdir=/var/log/flopfleet", "--output=flopfleet-%j.out"}
    assert set(options) ^ sbatch_options <= site_specific  # scrontab reads no #SBATCH line: the same options
    # The install line of the file's header: a random minute and hours 6 apart, different per cluster.
    (install,) = [line[1:].strip() for line in lines if "sed " in line and line.startswith("#")]
    assert install in (ROOT / "deploy" / "README.md").read_text()
    installed = subprocess.run(["bash", "-c", install.replace("/tmp/flopfleet.scrontab", "/dev/stdout")],
                               capture_output=True, text=True, cwd=SLURM, timeout=30)  # fmt: skip
    minute, hours = next(ln for ln in installed.stdout.splitlines() if ln[:1].isdigit()).split()[:2]
    first = int(hours.split(",")[0])
    assert 0 <= int(minute) <= 59 and hours == ",".join(str(first + 6 * i) for i in range(4)) and first <= 5
    # What scrontab submits (its script: #!/bin/sh and the command), with the entry's options, the controller takes.
    test = cluster.run("sbatch", "--test-only", *(o for o in options if not o.startswith("--chdir")),
                       "--wrap", entry.split(None, 5)[5])  # fmt: skip
    assert "to start at" in test.stderr and f"on nodes {cluster.node} in partition gpu" in test.stderr, test.stderr


def test_the_health_check_program_drains_the_node_naming_the_faulty_gpu(cluster: Cluster, tmp_path: Path) -> None:
    faulty = _this_host((681.0, 680.0), counters_after={"ecc_uncorrected_volatile": 1})
    with _fleet(tmp_path, faulty) as site:
        _, log = cluster.hook("healthcheck", _agent_config(tmp_path, site))  # slurmd runs it every 2 s
        state, reason = _until(
            lambda: "drain" in cluster.state()[0] and cluster.state(), "the drain",
            show=lambda: f"{cluster.state()}\n{log.read_text() if log.exists() else ''}",
        )  # fmt: skip
    assert reason == "flopfleet: GPU 1 faulty: 1 uncorrectable ECC error(s) since the driver loaded " \
                     "(ecc_uncorrected_volatile)", (state, reason)  # fmt: skip
    assert state == "drained"
    assert f"node {cluster.node}: CRITICAL: drained: {reason}" in log.read_text()


def test_a_prolog_drains_the_node_and_keeps_the_job_off_it(cluster: Cluster, tmp_path: Path) -> None:
    slow = [_this_host((681.0, 560.0)), _this_host((680.0, 562.0), hour=1)]  # confirmed: two low runs of GPU 1
    ran = tmp_path / "ran"
    with _fleet(tmp_path, *slow) as site:
        _, log = cluster.hook("prolog", _agent_config(tmp_path, site))
        job = cluster.run("sbatch", "--parsable", "--partition=gpu", "--output=/dev/null", "--wrap", f"touch {ran}")
        job_id = job.stdout.strip().split(";")[0]
        _, reason = _until(lambda: "drain" in cluster.state()[0] and cluster.state(), "the drain",
                           show=lambda: f"{cluster.state()}\n{log.read_text() if log.exists() else ''}")  # fmt: skip

        def held() -> bool:  # RUNNING (configuring) while its prolog runs, then requeued, and held by default
            queued = cluster.run("squeue", "--noheader", "-j", job_id, "-o", "%T|%r").stdout.strip()
            return queued == "PENDING|launch failed requeued held"

        _until(held, f"job {job_id} to be requeued and held", show=cluster.tail)
    # 17 % below its peers, or further below its sibling cards' (the card has no baseline of its own): the further
    assert re.match(r"flopfleet: GPU 1 slow: BF16 matmul 562 TFLOPS is \d+% below its", reason), reason
    assert "in 2 of its last 2 measurements" in reason and len(reason) <= 200
    assert not ran.exists()
    assert "CRITICAL: drained: flopfleet: GPU 1 slow" in log.read_text()


def test_ok_and_unknown_never_drain_even_in_a_prolog(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "away").mkdir()
    with _fleet(tmp_path / "ok", _this_host((681.0, 679.5))) as site:
        ok, ok_log = cluster.hook("ok", _agent_config(tmp_path / "ok", site))
        away, away_log = cluster.hook("away", _agent_config(tmp_path / "away", None))
        env = {"SLURMD_NODENAME": cluster.node, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}  # as slurmd runs a prolog
        both = [subprocess.Popen([str(hook)], env=env, stderr=subprocess.PIPE, text=True) for hook in (ok, away)]
        errors = [p.communicate(timeout=120)[1] for p in both]
    assert [p.returncode for p in both] == [0, 0], errors
    assert "OK: nothing to do" in ok_log.read_text()
    assert "UNKNOWN: nothing to do" in away_log.read_text() and "could not be read" in away_log.read_text()
    assert cluster.state() == ("idle", "none")


def test_a_node_drained_by_someone_else_is_left_as_it_is(cluster: Cluster, tmp_path: Path) -> None:
    cluster.drain("admin: fan replaced, burn-in pending")
    faulty = _this_host((681.0, 680.0), counters_after={"remapped_rows_failed": True})
    with _fleet(tmp_path, faulty) as site:
        hook, log = cluster.hook("direct", _agent_config(tmp_path, site))
        done = subprocess.run([str(hook)], env={"SLURMD_NODENAME": cluster.node}, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert cluster.state() == ("drained", "admin: fan replaced, burn-in pending")
    assert "by someone else (admin: fan replaced, burn-in pending): left as it is" in log.read_text()
