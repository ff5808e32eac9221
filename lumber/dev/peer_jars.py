"""Where the jars of the real peers (Apache Kafka, Hadoop's HDFS) are, once ``make jars`` has fetched them.

Each peer has a small Maven file in the tree, ``peers/<peer>/pom.xml``, that names its artifacts.
``make jars`` (run first by ``make test``, ``make demo`` and ``make bench``) copies each peer's runtime jars
from Maven Central into ``.jars/<peer>/`` at the top of the checkout, once; the folder is git-ignored.
Nothing is downloaded while a test, the demo or a benchmark runs: a launcher asks :func:`peer_classpath`,
which fails with a clear error when the jars are not there.

``LUMBER_JARS_DIR`` names another cache folder (holding ``<peer>/*.jar``), for an installed Lumber that is not
run from its checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.errors import DevStackError

JARS_DIR_ENV = "LUMBER_JARS_DIR"


def jars_dir() -> Path:
    """The jar cache: ``$LUMBER_JARS_DIR``, else ``.jars/`` at the top of this checkout."""
    override = os.environ.get(JARS_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / ".jars"


def peer_jars(peer: str) -> list[Path]:
    """The jars of ``peer`` (``kafka``, ``hadoop``), sorted; a clear error naming the fix if none."""
    folder = jars_dir() / peer
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise DevStackError(
            f"no {peer} jars in {folder}: run 'make jars' (it fetches peers/{peer}/pom.xml's artifacts from "
            f"Maven Central once), or set {JARS_DIR_ENV} to a folder holding {peer}/*.jar"
        )
    return jars


def peer_classpath(peer: str) -> str:
    """``peer``'s jars joined as a Java classpath."""
    return os.pathsep.join(str(jar) for jar in peer_jars(peer))
