"""One image into one record: what is stored as it is and what is re-encoded, resizing, the Example."""
