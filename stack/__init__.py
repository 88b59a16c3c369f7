"""The appliance launcher (`iot-stack`): runs Mosquitto, Kafka and the appliance's services as
supervised local processes; renders their configs; creates the design's topics."""
