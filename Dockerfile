# One image for every service of the appliance: Mosquitto (Debian's package), the Kafka broker
# (Maven Central jars), the bridge, the simulator and the Spark jobs (with Spark's Kafka connector).
# docker-compose.yml picks the service by its command.
#
# Three stages, so that a code change rebuilds in seconds and the image carries no build tool:
# - deps: the Python dependencies in a virtualenv, keyed on the dependency list alone (not on
#   pyproject.toml as a whole): pyspark's 434 MB sdist is built once, not at every change;
# - build: the Maven jars, the Mosquitto plugin (gcc) and the appliance's own wheel;
# - the image: Debian's runtime packages only (no maven, gcc or headers), the virtualenv, the
#   jars and plugin under IOT_HOME, run as the unprivileged user `iot` (uid 10001).
# The base is the local python:3.11-slim-bookworm that `make containers` builds from Debian's
# mirror (.ci/containers); docs/operations.md "Running with containers" has sizes and times.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS deps-list
COPY pyproject.toml /src/
RUN python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb")); \
deps = p["project"]["dependencies"]; \
open("/pyspark.txt", "w").write("\n".join(d for d in deps if d.startswith("pyspark"))); \
open("/requirements.txt", "w").write("\n".join(deps))'

FROM ${BASE} AS deps
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
# only the lists: a change elsewhere in pyproject.toml leaves these layers cached; pyspark (a
# 434 MB sdist built here, minutes) first and alone, so a new dependency does not rebuild it
COPY --from=deps-list /pyspark.txt /pyspark.txt
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -r /pyspark.txt
# python-qpid-proton (iot-amqp) builds from its sdist: a compiler, Python's headers, and
# OpenSSL found through pkg-config, else it builds without TLS, silently (the image keeps
# Debian's libssl3 only)
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev python3-dev libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
COPY --from=deps-list /requirements.txt /requirements.txt
RUN /opt/venv/bin/pip install --no-cache-dir -r /requirements.txt

FROM ${BASE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      maven openjdk-17-jre-headless mosquitto-dev libmosquitto-dev gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/iot
# Jars first: they change least, so this layer is cached across code changes.
COPY kafka/ kafka/
RUN for d in kafka/broker kafka/spark-connector; do \
      mvn -q -B -s kafka/maven-settings.xml -f "$d/pom.xml" \
        dependency:copy-dependencies -DoutputDirectory=libs -DincludeScope=runtime; \
    done && rm -rf /root/.m2
COPY mosquitto/ mosquitto/
# iot_auth_metrics: refused log-ins per user; iot_front_auth: the MQTT shards behind HAProxy's
# TLS front (docker-compose.shards.yml), as .ci/setup builds them
RUN mkdir -p mosquitto/plugins/build \
 && for plugin in iot_auth_metrics iot_front_auth; do \
      gcc -shared -fPIC -O2 -Wall -Wextra -Werror \
        -o "mosquitto/plugins/build/$plugin.so" "mosquitto/plugins/$plugin.c" || exit 1; \
    done
COPY pyproject.toml README.md ./
COPY mqtt_codec/ mqtt_codec/
COPY appconfig/ appconfig/
COPY health/ health/
COPY kafka_watch/ kafka_watch/
COPY bridge/ bridge/
COPY commands/ commands/
COPY device_sim/ device_sim/
COPY registry/ registry/
COPY api/ api/
COPY spark_jobs/ spark_jobs/
COPY stack/ stack/
COPY edge/ edge/
COPY amqp/ amqp/
RUN PIP_CERT=/etc/ssl/certs/ca-certificates.crt pip wheel --no-cache-dir --no-deps \
      --wheel-dir /wheel .

FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      mosquitto mosquitto-clients haproxy openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/iot iot \
 && mkdir -p /data/mqtt-front /secrets /ca /warehouse /mosquitto-data \
 && chown iot:iot /data /data/mqtt-front /secrets /ca /warehouse /mosquitto-data \
 && chmod 0700 /data/mqtt-front
ENV IOT_HOME=/opt/iot \
    IOT_DATA_DIR=/data \
    IOT_BIND_HOST=0.0.0.0 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH
COPY --from=deps /opt/venv /opt/venv
# what IOT_HOME serves at run time (stack/paths.py): the jars, Kafka's log config, Mosquitto's
# config template and plugin; the code itself is the wheel installed into the virtualenv
COPY --from=build /opt/iot/kafka/ /opt/iot/kafka/
COPY --from=build /opt/iot/mosquitto/ /opt/iot/mosquitto/
COPY --from=build /wheel/ /tmp/wheel/
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --no-index /tmp/wheel/*.whl \
 && rm -rf /tmp/wheel
WORKDIR /home/iot
USER iot

VOLUME ["/data"]
EXPOSE 1883 9092 9100
CMD ["iot-bridge", "--help"]
