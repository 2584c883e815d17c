"""verify: the checks of a build folder and their report."""
