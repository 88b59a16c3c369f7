# One image for every service of the appliance: Mosquitto (Debian's package), the Kafka broker
# (Maven Central jars), the bridge, the simulator and the Spark jobs (with Spark's Kafka connector).
# docker-compose.yml picks the service by its command.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      mosquitto mosquitto-clients openjdk-17-jre-headless maven procps \
      mosquitto-dev libmosquitto-dev gcc libc6-dev libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/iot
ENV IOT_HOME=/opt/iot \
    IOT_DATA_DIR=/data \
    IOT_BIND_HOST=0.0.0.0 \
    PYTHONUNBUFFERED=1

# Jars first: they change least, so this layer is cached across code changes.
COPY kafka/ kafka/
RUN for d in kafka/broker kafka/spark-connector; do \
      mvn -q -B -s kafka/maven-settings.xml -f "$d/pom.xml" \
        dependency:copy-dependencies -DoutputDirectory=libs -DincludeScope=runtime; \
    done && rm -rf /root/.m2

COPY pyproject.toml README.md ./
COPY mqtt_codec/ mqtt_codec/
COPY appconfig/ appconfig/
COPY health/ health/
COPY bridge/ bridge/
COPY commands/ commands/
COPY device_sim/ device_sim/
COPY registry/ registry/
COPY api/ api/
COPY spark_jobs/ spark_jobs/
COPY stack/ stack/
COPY edge/ edge/
COPY amqp/ amqp/
COPY mosquitto/ mosquitto/
RUN mkdir -p mosquitto/plugins/build \
 && gcc -shared -fPIC -O2 -Wall -Wextra -Werror \
      -o mosquitto/plugins/build/iot_auth_metrics.so mosquitto/plugins/iot_auth_metrics.c
RUN pip install --no-cache-dir .

VOLUME ["/data"]
EXPOSE 1883 9092 9100
CMD ["iot-bridge", "--help"]
