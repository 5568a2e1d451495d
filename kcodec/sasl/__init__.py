"""SASL pieces that the client and the broker share (see ``kcodec.sasl.scram``)."""
