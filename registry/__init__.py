"""Device registry: tenants, devices, credentials, groups, service accounts and their roles.

Pure modules (ids, model, hashing, topics, acl, audit, state, permissions, dynsec_plan,
dynsec_config) hold the rules; adapters (kafka_store, dynsec) talk to Kafka and Mosquitto;
service.Registry composes them; cli is the `iot-devices` console script.
"""
