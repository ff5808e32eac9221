# Lumber's two commands: `make demo` and `make test`. Each installs what it needs into .venv first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lumber-installed

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: help java venv jars airflow test-packages demo test bench lint typecheck pytest clean

help:
	@echo "make demo      - start a local stack (.lumber-demo/) and run the hourly pipeline end to end"
	@echo "make test      - lint, typecheck and pytest: the whole check (about 16-20 minutes on 2 cores)"
	@echo "make venv      - install Lumber and its dependencies into .venv (the other targets do it first)"
	@echo "make jars      - fetch the real peers' jars (Apache Kafka, Hadoop HDFS) from Maven Central into .jars/"
	@echo "make airflow   - install Apache Airflow into .airflow-venv/ (once) for the test of jobs/airflow_dag_example.py"
	@echo "make lint      - ruff check and ruff format --check"
	@echo "make typecheck - mypy (strict on library code)"
	@echo "make pytest    - the test suite alone (real ZooKeeper, brokers and Spark); PYTEST_ARGS='-m \"not slow\"'"
	@echo "make bench     - Lumber vs Apache Kafka, then the paper's Section 5: vs RabbitMQ and ActiveMQ"
	@echo "make clean     - delete .venv and the tools' caches"

# Spark and ZooKeeper need Java 17 or newer; say so before installing anything.
java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java 17 or newer is required (Spark and ZooKeeper run on it), and 'java' is not on PATH. Install e.g. Debian's openjdk-17-jre-headless." >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1); \
	 if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "error: Java 17 or newer is required, found: $$(java -version 2>&1 | head -n1)" >&2; exit 1; fi

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11 or newer is required, found " + sys.version)'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing Lumber and its dependencies into $(VENV) (the first time takes a few minutes: pyspark is large)"
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: java $(STAMP)

# The real peers' jars (peers/<peer>/pom.xml: Apache Kafka, Hadoop's HDFS), copied from Maven Central into
# .jars/<peer>/ (git-ignored) once, with Maven's own local repository as the download cache. Tests, the demo
# and benchmarks only read .jars/ (lumber/dev/peer_jars.py): nothing is downloaded while they run.
JARS_STAMPS := $(patsubst peers/%/pom.xml,.jars/%/.fetched,$(wildcard peers/*/pom.xml))

.jars/%/.fetched: peers/%/pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "error: Maven ('mvn') is needed once to fetch the $* jars (Debian: apt-get install maven)" >&2; exit 1; }
	@echo "fetching the $* jars from Maven Central into .jars/$* (once)"
	@rm -rf .jars/$* && mkdir -p .jars/$*
	mvn -q -B -f $< dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(abspath .jars/$*)
	@touch $@

jars: java $(JARS_STAMPS)

# Apache Airflow, in a virtualenv of its own (.airflow-venv/, git-ignored), once: the test of the example DAG
# (tests/jobs/test_airflow_dag_example.py) runs `airflow dags test` from it against a real stack. Airflow is
# not a Lumber dependency (its own pins would fight Lumber's); the DAG calls Lumber through its CLI.
AIRFLOW_VERSION ?= 3.3.2
AIRFLOW_STAMP   := .airflow-venv/.airflow-$(AIRFLOW_VERSION)

$(AIRFLOW_STAMP):
	@echo "installing Apache Airflow $(AIRFLOW_VERSION) into .airflow-venv (once)"
	@rm -rf .airflow-venv
	$(PYTHON) -m venv .airflow-venv
	.airflow-venv/bin/python -m pip install --quiet --upgrade pip
	.airflow-venv/bin/python -m pip install --quiet 'apache-airflow==$(AIRFLOW_VERSION)'
	@touch $@

airflow: $(AIRFLOW_STAMP)

# The stack keeps running afterwards; the last lines say how to look around and how to stop it.
# DEMO_ARGS e.g. --hours 4, --state-dir /tmp/demo (see .venv/bin/lumber demo --help).
demo: venv jars
	$(VENV)/bin/lumber demo $(DEMO_ARGS)

# Lumber against Apache Kafka (its jars from `make jars`), then the paper's Section 5 experiment
# (bench/paper.py; results in BENCHMARKS.md). Its setup step installs the paper's peers, Debian's
# rabbitmq-server and activemq, when they are missing (apt-get: needs root). BENCH_ARGS e.g. --quick (a
# smoke run), --messages 500000, --rounds 5, --many-partitions, --systems kafka.
bench: venv jars
	$(PY) bench/paper.py --setup
	$(PY) bench/paper.py $(BENCH_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy

# Debian packages the tests use as real third-party parts: kcat (librdkafka's CLI, a Kafka client),
# chromium (the console's pages are tested in a headless browser, driven by Playwright; no browser is
# downloaded) and prometheus (its promtool checks the alerting rules). Installed when missing (apt-get:
# needs root).
test-packages:
	@missing=""; \
	 command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	 test -x /usr/bin/chromium || missing="$$missing chromium"; \
	 command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	 if [ -n "$$missing" ]; then \
	   echo "installing$$missing (apt-get)"; \
	   apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	 fi

# Test files run on PYTEST_WORKERS processes (pytest-xdist), each file whole on one worker: most of the
# suite's time is waiting on real processes (sessions expiring, brokers failing over, Spark starting), so
# three workers on two cores keep both busy (two used about 1.35 cores on average). The 30 slowest tests are
# listed at the end, so that a run near CI's budget shows where its time went.
PYTEST_WORKERS ?= 3

pytest: venv jars airflow test-packages
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=30 $(PYTEST_ARGS)

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .jars .airflow-venv
