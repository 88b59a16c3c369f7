"""Edge sites (`iot-edge`): a site broker that dials out to the centre through NAT, keeps what
its devices sent while the link is down and carries their commands back in (docs/edge.md)."""
