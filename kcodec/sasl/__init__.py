"""SASL pieces that the client and the broker share.

    scram.py   SCRAM's maths and message syntax (RFC 5802, RFC 7677), for both ends
"""
