# The two commands of the README, and a few conveniences. Every target that needs the tools
# runs the idempotent set-up first (.ci/setup), so a fresh Debian machine needs nothing else.
SHELL := /bin/bash
# Python may cache its bytecode (a shell or CI that sets PYTHONDONTWRITEBYTECODE=1 makes every
# process compile the project again, and pytest rewrite every test module's asserts in every
# worker: 16 s of `make unit`'s collection, 6 s with the caches; __pycache__ is git-ignored)
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
BIN := $(VENV)/bin
DEVICES ?= 200
RATE ?= 2
FLEET_ARGS ?=
SOAK_ARGS ?=

.PHONY: setup run stop status test lint unit integration containers test-containers bench bench-commands bench-fleet bench-http bench-amqp bench-soak bench-shards chaos

setup:
	@bash .ci/setup

## The main job: Mosquitto, Kafka, the bridge, the Spark streaming job and simulated devices.
run: setup
	$(BIN)/iot-stack up --analytics --console --devices $(DEVICES) --device-rate $(RATE)

stop:
	$(BIN)/iot-stack down

status:
	$(BIN)/iot-stack status

## Everything CI runs: format, lint, types, then every test (unit, integration, spark), on the
## xdist workers of pyproject's addopts; fails over the time budget (docs/development.md).
test: setup lint
	$(BIN)/pytest

## A container engine (Debian's docker.io, on a socket of its own) and the local base images:
## idempotent, ~5-6 min and ~2.5 GB the first time (root; docs/operations.md, "Running with
## containers"). Not part of `setup`: `make run` and `make test` need no engine.
containers:
	@sh .ci/containers

## The compose stack run for real: builds the image on the pinned base, `docker-compose up`,
## device (also over TLS), command, MR, console, Spark table, host loss under load (kafka3:
## IOT_HOSTLOSS_CUT_S, default 60), `down -v` (tests marked `containers`; CI runs it after
## `make test`).
test-containers: setup containers
	DOCKER_HOST=unix:///run/iot-containers/docker.sock $(BIN)/pytest --containers -m containers -n 0

lint:
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

## The unit tier: no server starts. Three workers on the 2 cores: its tests also wait (child
## processes, librdkafka's threads, a real xdist run), and a third worker fills those waits
## (pytest 82.8-97.7 s in 5 runs against 96.2-106.1 s in 4 with -n auto, each pair run one after
## the other; 95.8 s with -n 4); `pytest ... -n 0` to debug.
unit: setup
	$(BIN)/pytest -m "not integration and not spark" -n 3

bench: setup
	$(BIN)/python -m bench run --suite ingest

## The ingest ceiling and our bridge on one Mosquitto against --mqtt-shards 2 (issue 36), 3 runs each.
bench-shards: setup
	$(BIN)/python -m bench.shards --runs 3 --out bench/results/shards

## Command round trip at 1,000 commands/s, 1,000 devices, telemetry at half the bridge's maximum.
bench-commands: setup
	$(BIN)/python -m bench.commands_rtt --out-dir bench/results

## A fleet at scale: 20,000 devices (one connection each) for 30 minutes; FLEET_ARGS shortens it.
bench-fleet: setup
	$(BIN)/python -m bench.fleet --out-dir bench/results $(FLEET_ARGS)

## The bridge at 80% of its measured maximum for 30 minutes (rate, RSS, ack lag, lost); SOAK_ARGS shortens it.
bench-soak: setup
	$(BIN)/python -m bench.soak --out-dir bench/results $(SOAK_ARGS)

## iot-api over Kafka: batch and single publish, long-poll consume, latency, memory (docs/benchmarks.md)
bench-http: setup
	$(BIN)/python -m bench.http_api --out-dir bench/results

## AMQP 1.0 device uploads into Kafka: msgs/s, iot-amqp's CPU per message, p50/p99 at half load;
## an application's northbound receive; commands sent northbound to AMQP devices (round trip).
bench-amqp: setup
	$(BIN)/python -m bench.amqp_upload --runs 3 --out-dir bench/results

## Faults under load (issue 32): every service killed, hung, restarted, its disk full, under a
## mixed load through every door; the matrix in bench/results/chaos.md. CHAOS_ARGS: a subset
## (--services kafka,api --faults kill9); root for the disk-full cells (tmpfs mounts).
CHAOS_ARGS ?=
chaos: setup
	nice -n 10 $(BIN)/python -m bench.chaos --out bench/results/chaos.md $(CHAOS_ARGS)
