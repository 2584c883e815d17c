"""The files of a build: names, TFRecord framing, DALI indexes."""
