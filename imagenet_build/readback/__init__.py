"""Reading a build back: the public PyTorch and tf.data readers, and trainer-check on DALI or PyTorch."""
