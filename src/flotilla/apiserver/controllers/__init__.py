"""The API server's own controllers, run inside each server process: namespace lifecycle, garbage collection by
ownerReferences, and store compaction. They work on the server's storage directly, not through the API."""
