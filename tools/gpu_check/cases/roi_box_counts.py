"""RoiBoxCounts has no GPU check case."""

NO_GPU_CODE = {
    "RoiBoxCounts": "checks its counts in host memory and reads only the "
    "shapes of its inputs on the device",
}


def cases():
    return []
