"""The kcodec thin client: sans-I/O connection core, asyncio I/O and a blocking facade."""
