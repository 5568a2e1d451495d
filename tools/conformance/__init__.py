"""librdkafka's integration suite against kcodec broker (see run.py)."""
