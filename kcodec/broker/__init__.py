"""kcodec's broker: network layer, one handler per API, the log, the coordinators, security."""
