"""The `index` command: DALI indexes written for the TFRecord files a user names (index_run.py); the index
itself, its bytes and the rule every reader holds it to, is format/dali_index.py's."""
