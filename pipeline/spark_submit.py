"""How the load job is submitted: the project's code as a ``--py-files`` zip, and the spark-submit command.

The executors of a cluster do not have Lumber installed, so the job ships it: :func:`build_code_zip` packs
the ``broker``, ``schemas``, ``pipeline``, ``lumber`` (the driver reads ``lumber.toml`` with
:func:`lumber.config.load_config`) and ``jobs`` packages (their ``.py`` files and the shipped
``.avsc`` schemas) into one zip that ``spark-submit --py-files`` puts on every executor's ``sys.path``.
Lumber's third-party dependencies (pyarrow, fastavro, kazoo, httpx, crc32c, cramjam...) are not in the zip:
the Python named by ``spark.pyspark.python`` must have them, at the same path on every node (e.g. the
project's virtualenv created the same way on each node, or a packed environment shipped with ``--archives``
and ``spark.pyspark.python=./env/bin/python``).

:func:`spark_submit_command` is the exact command ``lumber etl run`` runs (and that ``jobs/load.py``'s
docstring shows)::

    <spark-submit> --master <[spark] master> --name lumber-load-<job>
        --conf spark.pyspark.python=<python> --conf spark.pyspark.driver.python=<python>
        --conf spark.sql.session.timeZone=UTC --conf spark.ui.enabled=false
        --conf <[spark] conf>...
        --py-files <zip> <repo>/jobs/load.py --config <lumber.toml> [--topics a,b] [--until-hour H]

run with the variables of :func:`submit_variables`: ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` (the
same Python), and for a local master (``local``, ``local[N]``, ``local[N,F]``, ``local-cluster[...]``)
``SPARK_LOCAL_IP=127.0.0.1`` unless the environment sets it: without it Spark binds the driver to the
host's first address and warns that it does so. A cluster's driver must be reachable by the executors, so
for any other master the variable is left to the user (or Spark's ``conf/spark-env.sh``).
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipeline.load_config import LoadConfig
from pipeline.load_errors import LoadError

PACKAGES = ("broker", "schemas", "pipeline", "lumber", "jobs")
_SUFFIXES = (".py", ".avsc", ".typed")
#: A fixed timestamp for the zip's entries, so the same code gives the same bytes.
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


def source_root() -> Path:
    """The folder holding the project's packages (the repository, or site-packages)."""
    import pipeline  # noqa: PLC0415

    return Path(pipeline.__file__).resolve().parent.parent


def job_script() -> Path:
    """``jobs/load.py``, the file spark-submit runs, found beside this package (not imported: ``jobs``
    imports ``pipeline``, never the reverse)."""
    script = source_root() / "jobs" / "load.py"
    if not script.is_file():
        raise LoadError(f"cannot find the load job's script: {script} does not exist")
    return script


def build_code_zip(dest: Path) -> Path:
    """Pack :data:`PACKAGES` into ``dest`` (replaced atomically); returns ``dest``."""
    root = source_root()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            base = root / package
            if not (base / "__init__.py").is_file():
                raise LoadError(f"cannot pack the code for executors: {base} is not a Python package")
            for path in sorted(base.rglob("*")):
                if path.is_file() and path.suffix in _SUFFIXES and "__pycache__" not in path.parts:
                    info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=_ZIP_TIME)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(info, path.read_bytes())
    tmp.replace(dest)
    return dest


def code_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def default_spark_submit() -> str:
    """The spark-submit installed with pyspark: next to this Python, else in pyspark's SPARK_HOME."""
    beside = Path(sys.executable).parent / "spark-submit"
    if beside.is_file():
        return str(beside)
    from pyspark.find_spark_home import _find_spark_home  # noqa: PLC0415

    home = Path(_find_spark_home())
    candidate = home / "bin" / "spark-submit"
    if not candidate.is_file():
        raise LoadError(f"no spark-submit found next to {sys.executable} nor in {home}/bin")
    return str(candidate)


def spark_submit_command(
    load: LoadConfig,
    *,
    config_path: Path,
    code_zip: Path,
    master: str | None = None,
    extra_conf: Sequence[str] = (),
    topics: Sequence[str] = (),
    until_hour: str | None = None,
) -> list[str]:
    """The spark-submit argv of one load run (see the module docstring)."""
    python = load.python or sys.executable
    argv = [
        load.spark_submit or default_spark_submit(),
        "--master",
        master or load.spark_master,
        "--name",
        f"lumber-load-{load.job}",
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        f"spark.pyspark.driver.python={python}",
        "--conf",
        "spark.sql.session.timeZone=UTC",
        "--conf",
        "spark.ui.enabled=false",
    ]
    for entry in [*load.spark_conf, *extra_conf]:
        if "=" not in entry:
            raise LoadError(f"Spark setting {entry!r}: expected key=value")
        argv += ["--conf", entry]
    argv += ["--py-files", str(code_zip), str(job_script()), "--config", str(config_path)]
    if topics:
        argv += ["--topics", ",".join(topics)]
    if until_hour:
        argv += ["--until-hour", until_hour]
    return argv


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs Spark inside the driver's JVM on this machine (``local``, ``local[...]``,
    ``local-cluster[...]``)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def submit_variables(
    load: LoadConfig, *, master: str | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables Lumber sets for spark-submit (see the module docstring), with their values."""
    env = os.environ if base is None else base
    python = load.python or sys.executable
    variables = {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    if is_local_master(master or load.spark_master):
        variables["SPARK_LOCAL_IP"] = env.get("SPARK_LOCAL_IP") or "127.0.0.1"
    return variables


def submit_environment(
    load: LoadConfig, base: Mapping[str, str] | None = None, *, master: str | None = None
) -> dict[str, str]:
    """The environment of spark-submit: ``base`` (default: this process's) with :func:`submit_variables`."""
    env = dict(os.environ if base is None else base)
    env.update(submit_variables(load, master=master, base=env))
    return env
