PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench soak lint clean venv protos browser

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/flotilla demo

# the dashboard's browser tests need Debian's chromium and chromedriver: installed when missing and we are root with
# apt-get; a failed install does not fail the tests (they skip, saying how to install them)
browser:
	@if { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; } && [ "$$(id -u)" = 0 ] \
	    && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium and chromium-driver for the dashboard's browser tests"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
	    >/dev/null 2>&1 || echo "could not install chromium; the browser tests will skip"; \
	fi

test: $(STAMP) browser
	$(VENV)/bin/ruff check src tests
	$(PY) -m pytest -q -p no:cacheprovider -n 3 --dist loadfile tests/unit tests/integration tests/compat
	$(PY) -m pytest -q -p no:cacheprovider -n 4 --dist loadfile tests/e2e

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	$(VENV)/bin/flotilla bench apiserver
	$(VENV)/bin/flotilla bench failover --workloads 1000 --members 3 --kind mix --purge-mode Directly --state \
		--storage sqlite --fault taint --json bench-failover.json --plot docs/img/failover-1000.png
	$(VENV)/bin/flotilla bench failover --workloads 1000 --members 3 --kind mix --purge-mode Directly --state \
		--storage etcd --fault taint --json bench-failover-etcd.json --plot docs/img/failover-1000-etcd.png
	$(VENV)/bin/flotilla bench failover --workloads 1 --members 3 --kind flink --purge-mode Directly --state \
		--fault partition --repeat 3 --json bench-failover-partition-1.json
	$(VENV)/bin/flotilla bench failover --workloads 1000 --members 3 --kind mix --purge-mode Directly --state \
		--fault partition --json bench-failover-partition-1000.json
	$(VENV)/bin/flotilla bench propagate --templates 1000 --members 3 --flink-share 0.1 --storage sqlite \
		--json bench-propagate.json --plot docs/img/propagate-1000.png
	$(VENV)/bin/flotilla bench propagate --templates 1000 --members 3 --flink-share 0.1 --storage sqlite --floor \
		--json bench-propagate-floor.json
	$(VENV)/bin/flotilla bench scale --members 100 --workloads 10000 --storage sqlite --idle-seconds 30 \
		--failover --failed-workloads 1000 --json bench-scale.json
	$(VENV)/bin/flotilla bench scale --members 100 --workloads 10000 --storage sqlite --idle-seconds 30 \
		--failover --failed-workloads 1000 --transport inprocess --json bench-scale-inprocess.json

soak: $(STAMP)
	$(VENV)/bin/flotilla soak crash --trials 10 --workloads 500 --members 3 --kind mix --seed 1 --json soak-crash.json
	$(VENV)/bin/flotilla soak ha --workloads 200 --members 3 --kind mix --json soak-ha.json
	$(VENV)/bin/flotilla soak partition --trials 10 --seed 1 --json soak-partition.json
	FLOTILLA_PARTITION_SOAK_SECONDS=600 $(PY) -m pytest -q -s -p no:cacheprovider tests/e2e/test_partitions.py -k never_flip
	FLOTILLA_FUZZ_SECONDS=600 FLOTILLA_FUZZ_EXAMPLES=3000 $(PY) -m pytest -q -p no:cacheprovider \
		tests/e2e/test_openapi_fuzz.py tests/compat/test_karmada_objects_fuzz.py tests/unit/test_go_regexp.py

# regenerate flotilla/storage/etcdpb's Python modules after changing its .proto files
protos: $(STAMP)
	$(PY) -m flotilla.storage.etcdpb.generate

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests

clean:
	rm -rf $(VENV) build src/*.egg-info
