"""convert's execution and commit: the run, one shard's writer, resume, the build folder, the manifest."""
