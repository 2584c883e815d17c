"""What every stage stands on: errors, storage (local or object store), atomic writes, locks, worker
processes, optional packages."""
