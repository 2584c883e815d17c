"""`python -m imagenet_build` is the `imagenet-build` command."""

from imagenet_build.cli import main

if __name__ == "__main__":
    main()
